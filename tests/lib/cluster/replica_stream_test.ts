import { assertEquals, assertThrows } from "../../_support/assert.ts";
import { decodeMessage, encodeMessage, frameRecord } from "../../../lib/cluster/replica_stream.ts";
import { encodeRecord, RecordType } from "../../../lib/storage/record.ts";

Deno.test("stream: a message keeps its index, entries and frames; a bad frame is refused", () => {
  const frame = encodeRecord({ type: RecordType.Group, seq: 7, name: "billing", createdAt: 1 });
  const msg = encodeMessage(42, [
    { kind: "snapshot-begin" },
    { kind: "record", topic: "orders.é", frame },
    { kind: "delete", topic: "old" },
    { kind: "snapshot-end" },
  ]);
  const { index, entries } = decodeMessage(msg);
  assertEquals(index, 42);
  assertEquals(entries.map((e) => e.kind), ["snapshot-begin", "record", "delete", "snapshot-end"]);
  const rec = entries[1]!;
  if (rec.kind !== "record") throw new Error("not a record");
  assertEquals(rec.topic, "orders.é");
  assertEquals(frameRecord(rec.frame), {
    type: RecordType.Group,
    seq: 7,
    name: "billing",
    createdAt: 1,
  });
  const damaged = frame.slice();
  damaged[damaged.length - 1]! ^= 1;
  assertThrows(() => frameRecord(damaged));
  assertThrows(() => decodeMessage(new Uint8Array([9, 0, 0])));
  assertThrows(() => decodeMessage(msg.subarray(0, msg.length - 3)));
});
