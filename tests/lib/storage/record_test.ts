import { assertEquals } from "../../_support/assert.ts";
import {
  checksumOk,
  decodeRecord,
  encodeRecord,
  FRAME_HEADER_BYTES,
  RecordType,
  type WalRecord,
} from "../../../lib/storage/record.ts";

const records: WalRecord[] = [
  {
    type: RecordType.Meta,
    seq: 1,
    policy: "drop-oldest",
    retainMs: 60_000,
    visibilityMs: 5_000,
    maxMessages: 10,
    createdAt: 1_700_000_000_000,
    maxBytes: 1 << 20,
    goneSeq: 0,
  },
  {
    type: RecordType.Publish,
    seq: 2,
    id: "01890a5d-ac96-774b-bcce-b302099a8057",
    timestamp: 1_700_000_000_001,
    priority: 0,
    merge: true,
    expiresAt: 1_700_000_060_001,
    redriveCount: 2,
    idemKey: "clé-ünïcode",
    reason: "bad input",
    origin: "billing",
    headers: ["x-mq-trace", "t1", "content-type", "application/json"],
    deliveries: [{ group: "", retryCount: 1, dueAt: 5 }, {
      group: "billing",
      retryCount: 2,
      dueAt: 0,
    }],
    dueAt: 0,
    payload: new Uint8Array([0, 255, 1, 254]),
  },
  {
    type: RecordType.Publish,
    seq: 3,
    id: "01890a5d-ac96-774b-bcce-b302099a8058",
    timestamp: 1,
    priority: 1,
    merge: false,
    expiresAt: 0,
    redriveCount: 0,
    idemKey: undefined,
    reason: undefined,
    origin: undefined,
    headers: undefined,
    deliveries: undefined,
    dueAt: 99,
    payload: new Uint8Array([7]),
  },
  { type: RecordType.Group, seq: 4, name: "billing", createdAt: 2 },
  { type: RecordType.Ack, seq: 5, group: "", ids: ["a", "b"] },
  {
    type: RecordType.Requeue,
    seq: 6,
    group: "g",
    id: "a",
    retryCount: 2,
    dueAt: 10,
    reason: "try later",
  },
  { type: RecordType.Remove, seq: 7, ids: ["x"] },
  { type: RecordType.Key, seq: 8, key: "k", id: "a", at: 3 },
  { type: RecordType.Purge, seq: 9 },
  {
    type: RecordType.Webhook,
    seq: 10,
    id: "0193a0b1-hook",
    url: "https://example.com/hook?x=1",
    secret: "whsec_c2VjcmV0",
    createdAt: 4,
    active: true,
  },
  {
    type: RecordType.Webhook,
    seq: 10,
    id: "0193a0b1-sealed",
    url: "https://example.com/hook",
    secret: "",
    createdAt: 4,
    active: true,
    sealedSecret: new Uint8Array([1, 2, 3, 250]),
  },
  {
    type: RecordType.Webhook,
    seq: 11,
    id: "0193a0b1-hook",
    url: "",
    secret: "",
    createdAt: 5,
    active: false,
  },
];

Deno.test("encodeRecord()/decodeRecord() round-trip every record type", () => {
  for (const r of records) {
    const frame = encodeRecord(r);
    const view = new DataView(frame.buffer, frame.byteOffset);
    const body = frame.subarray(FRAME_HEADER_BYTES);
    assertEquals(view.getUint32(0, true), body.length, `length of type ${r.type}`);
    assertEquals(checksumOk(view.getUint32(4, true), body), true, `checksum of type ${r.type}`);
    assertEquals(decodeRecord(body), r);
  }
});

Deno.test("checksumOk() rejects a flipped payload byte", () => {
  const frame = encodeRecord(records[1]!);
  const crc = new DataView(frame.buffer).getUint32(4, true);
  frame[frame.length - 1]! ^= 1;
  assertEquals(checksumOk(crc, frame.subarray(FRAME_HEADER_BYTES)), false);
});

Deno.test("decodeRecord() reads a META written before max_bytes existed as no byte cap", () => {
  const frame = encodeRecord(records[0]!);
  const body = frame.subarray(FRAME_HEADER_BYTES, frame.length - 16); // without both
  assertEquals(decodeRecord(body), { ...records[0]!, maxBytes: 0, goneSeq: 1 } as WalRecord);
});

Deno.test("decodeRecord() reads a META written before goneSeq existed as gone up to its own seq", () => {
  const meta = { ...records[0]!, seq: 40, goneSeq: 12 } as WalRecord;
  const frame = encodeRecord(meta);
  assertEquals(decodeRecord(frame.subarray(FRAME_HEADER_BYTES)), meta);
  const body = frame.subarray(FRAME_HEADER_BYTES, frame.length - 8); // without goneSeq
  assertEquals(decodeRecord(body), { ...meta, goneSeq: 40 } as WalRecord);
});
