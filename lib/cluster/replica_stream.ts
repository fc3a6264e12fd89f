/**
 * @module The replication stream's wire format, leader to follower: one binary message per
 * batch, `[u8 version][f64 index]` then entries. `index` counts the entries the leader has
 * shipped in this term up to the end of the message; a follower acks an index once everything
 * up to it is on its disk. Entries: a WAL frame of a topic (exactly the bytes the WAL writes,
 * checksum included), a topic deletion, and the two marks around a snapshot.
 */

import { checksumOk, decodeRecord, FRAME_HEADER_BYTES, type WalRecord } from "../storage/record.ts";

const STREAM_VERSION = 1;

/** One entry of the stream. */
export type Entry =
  | { kind: "record"; topic: string; frame: Uint8Array }
  | { kind: "delete"; topic: string }
  | { kind: "snapshot-begin" }
  | { kind: "snapshot-end" };

const KIND = { "record": 1, "delete": 2, "snapshot-begin": 3, "snapshot-end": 4 } as const;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Bytes of `e` in a message. */
function entrySize(e: Entry, name: Uint8Array | undefined): number {
  if (e.kind === "record") return 1 + 2 + name!.length + 4 + e.frame.length;
  if (e.kind === "delete") return 1 + 2 + name!.length;
  return 1;
}

/** One message carrying `entries`, stamped with the stream index at its end. */
export function encodeMessage(index: number, entries: Entry[]): Uint8Array {
  const names = entries.map((e) => "topic" in e ? encoder.encode(e.topic) : undefined);
  let size = 1 + 8;
  for (let i = 0; i < entries.length; i++) size += entrySize(entries[i]!, names[i]);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out[0] = STREAM_VERSION;
  view.setFloat64(1, index, true);
  let pos = 9;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    out[pos++] = KIND[e.kind];
    const name = names[i];
    if (name) {
      view.setUint16(pos, name.length, true);
      out.set(name, pos + 2);
      pos += 2 + name.length;
    }
    if (e.kind === "record") {
      view.setUint32(pos, e.frame.length, true);
      out.set(e.frame, pos + 4);
      pos += 4 + e.frame.length;
    }
  }
  return out;
}

/** The index and entries of a message; throws on anything malformed. */
export function decodeMessage(msg: Uint8Array): { index: number; entries: Entry[] } {
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  if (msg.length < 9 || msg[0] !== STREAM_VERSION) throw new Error("bad replication message");
  const index = view.getFloat64(1, true);
  const entries: Entry[] = [];
  let pos = 9;
  const name = () => {
    const n = view.getUint16(pos, true);
    if (pos + 2 + n > msg.length) throw new Error("truncated replication message");
    const s = decoder.decode(msg.subarray(pos + 2, pos + 2 + n));
    pos += 2 + n;
    return s;
  };
  while (pos < msg.length) {
    const kind = msg[pos++];
    if (kind === KIND.record) {
      const topic = name();
      const n = view.getUint32(pos, true);
      if (pos + 4 + n > msg.length) throw new Error("truncated replication message");
      entries.push({ kind: "record", topic, frame: msg.subarray(pos + 4, pos + 4 + n) });
      pos += 4 + n;
    } else if (kind === KIND.delete) entries.push({ kind: "delete", topic: name() });
    else if (kind === KIND["snapshot-begin"]) entries.push({ kind: "snapshot-begin" });
    else if (kind === KIND["snapshot-end"]) entries.push({ kind: "snapshot-end" });
    else throw new Error(`unknown replication entry ${kind}`);
  }
  return { index, entries };
}

/** The record a shipped frame holds, its checksum checked. */
export function frameRecord(frame: Uint8Array): WalRecord {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const body = frame.subarray(FRAME_HEADER_BYTES);
  if (view.getUint32(0, true) !== body.length || !checksumOk(view.getUint32(4, true), body)) {
    throw new Error("a replicated frame failed its checksum");
  }
  return decodeRecord(body);
}
