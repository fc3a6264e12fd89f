/**
 * @module The WAL record format: encode and decode. Records are what the topic applies, live
 * and at replay, and what a cluster leader will ship to followers.
 *
 * File:   "FERRYWAL" | u16 file version (1) | u16 0 | u32 0          (16-byte header)
 * Record: u32 body length | u32 CRC-32 (IEEE, zlib) of body | body
 * Body:   u8 type | u8 record version (1) | f64 seq | fields of the type, little-endian;
 *         str = u16 byte length + UTF-8; bytes = u32 length + raw bytes; time = f64 ms (0 = none)
 *
 *   META     policy u8 | retain time | visibility time | maxMessages f64 | createdAt time |
 *            maxBytes f64 (absent from older files: read as 0) |
 *            goneSeq f64: messages stored up to this sequence number may have left the topic
 *            with no record of it in the file (a compaction drops them; absent from older files:
 *            read as the record's own seq, so a resume from before it is told it missed data)
 *   PUBLISH  id str | timestamp time | priority u8 (bit 7: merge) | expiresAt time | redriveCount u16 |
 *            idemKey str | reason str | origin str | dueAt time | headers u16 n × (str, str) | deliveries u16 n ×
 *            (group str, retryCount u8, dueAt time) — n = 0xffff means "every group" |
 *            payload bytes
 *   GROUP    name str | createdAt time
 *   ACK      group str | n u32 × id str        (the group is done with these ids)
 *   REQUEUE  group str | id str | retryCount u8 | dueAt time | reason str
 *   REMOVE   n u32 × id str                    (gone from every group: drop-oldest, moved)
 *   KEY      key str | id str | at time        (an idempotency key kept across compaction)
 *   PURGE    (nothing)                         (every message gone, groups kept)
 *   WEBHOOK  id str | url str | secret str | createdAt time | active u8 |
 *            sealedSecret bytes (absent from older files: read as none)
 *            (a webhook registered, with its own group `webhook:<id>`; active 0: removed,
 *            its group and what the group held gone. The secret is sealed (lib/push/secret_box.ts)
 *            in sealedSecret, and `secret` is ""; a record written before sealing has the plain
 *            secret there and no sealedSecret, and an older broker reads a sealed one as unsigned)
 *
 * Versioning: a record's body only grows at its end. A field added later is appended after the
 * last one, written by every encoder from then on, and read only when the body has bytes left;
 * a record written before it gets the default stated beside the field above, chosen to err on
 * the safe side (a reset, never a silent skip). Older brokers ignore the bytes after the fields
 * they know, so a newer file stays readable to them. RECORD_VERSION changes only for what an
 * old reader cannot skip (a field moved, removed or read differently), and FILE_VERSION only for
 * a new framing; replay refuses a version it does not know.
 */

import type { Policy } from "../../protocol/wire.ts";
import { crc32 } from "./crc32.ts";

export const FILE_MAGIC = "FERRYWAL";
export const FILE_VERSION = 1;
export const RECORD_VERSION = 1;
export const FILE_HEADER_BYTES = 16;
export const FRAME_HEADER_BYTES = 8;
/** A record body larger than this is corruption, not data (payloads are at most 2 MiB). */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;
/** Bit of the PUBLISH priority byte that marks a record whose id may already be held. */
const MERGE_BIT = 0x80;
/** `deliveries` count meaning "deliver to every group that exists". */
export const ALL_GROUPS = 0xffff;

export const enum RecordType {
  Meta = 1,
  Publish = 2,
  Group = 3,
  Ack = 4,
  Requeue = 5,
  Remove = 6,
  Key = 7,
  Purge = 8,
  Webhook = 9,
}

const POLICIES: Policy[] = ["reject", "drop-oldest"];

export interface MetaRecord {
  type: RecordType.Meta;
  seq: number;
  policy: Policy;
  retainMs: number;
  visibilityMs: number;
  maxMessages: number;
  createdAt: number;
  /** 0: no byte cap. */
  maxBytes: number;
  /** Highest sequence number of a message no longer held (0: none has left). */
  goneSeq: number;
}
export interface DeliverySpec {
  group: string;
  retryCount: number;
  dueAt: number;
}
export interface PublishRecord {
  type: RecordType.Publish;
  seq: number;
  id: string;
  timestamp: number;
  priority: number;
  /**
   * The id may already be held (a dead-letter move or a redrive): apply() then joins the
   * existing message. Every other publish has a fresh id and skips that lookup.
   */
  merge: boolean;
  expiresAt: number;
  redriveCount: number;
  idemKey: string | undefined;
  reason: string | undefined;
  /** The group a dead-lettered message came from; redrive returns it there. */
  origin: string | undefined;
  headers: string[] | undefined;
  /** undefined: every group gets a ready (or delayed until `dueAt`) copy. */
  deliveries: DeliverySpec[] | undefined;
  /** When every group's copy becomes visible (0 = now); used when deliveries is undefined. */
  dueAt: number;
  payload: Uint8Array;
}
export interface GroupRecord {
  type: RecordType.Group;
  seq: number;
  name: string;
  createdAt: number;
}
export interface AckRecord {
  type: RecordType.Ack;
  seq: number;
  group: string;
  ids: string[];
}
export interface RequeueRecord {
  type: RecordType.Requeue;
  seq: number;
  group: string;
  id: string;
  retryCount: number;
  dueAt: number;
  reason: string | undefined;
}
export interface RemoveRecord {
  type: RecordType.Remove;
  seq: number;
  ids: string[];
}
export interface KeyRecord {
  type: RecordType.Key;
  seq: number;
  key: string;
  id: string;
  at: number;
}
export interface PurgeRecord {
  type: RecordType.Purge;
  seq: number;
}

export interface WebhookRecord {
  type: RecordType.Webhook;
  seq: number;
  id: string;
  url: string;
  /** "" unless the record was written before secrets were sealed: then the plain secret. */
  secret: string;
  createdAt: number;
  /** False: the webhook was removed. */
  active: boolean;
  /** The secret, sealed (lib/push/secret_box.ts); absent when the webhook is not signed. */
  sealedSecret?: Uint8Array;
}

export type WalRecord =
  | MetaRecord
  | PublishRecord
  | GroupRecord
  | AckRecord
  | RequeueRecord
  | RemoveRecord
  | KeyRecord
  | PurgeRecord
  | WebhookRecord;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const NO_BYTES = new Uint8Array(0);

/** The 16-byte header every WAL file starts with. */
export function fileHeader(): Uint8Array {
  const h = new Uint8Array(FILE_HEADER_BYTES);
  encoder.encodeInto(FILE_MAGIC, h);
  new DataView(h.buffer).setUint16(8, FILE_VERSION, true);
  return h;
}

/** The file version of a header, or an error string when it is not a Ferry WAL. */
export function readFileHeader(h: Uint8Array): number | string {
  if (h.length < FILE_HEADER_BYTES) return "file shorter than its header";
  if (decoder.decode(h.subarray(0, 8)) !== FILE_MAGIC) return "not a Ferry WAL (bad magic)";
  return new DataView(h.buffer, h.byteOffset, h.byteLength).getUint16(8, true);
}

function strBytes(s: string | undefined): number {
  if (!s) return 2;
  // Worst case 3 bytes per UTF-16 unit; exact for ASCII, which ids and names always are.
  return 2 + (isAscii(s) ? s.length : encoder.encode(s).length);
}

/** An id list: u32 count, then each id as a str. */
function idsBytes(ids: string[]): number {
  let n = 4;
  for (const id of ids) n += strBytes(id);
  return n;
}

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** Serialises a record into one new frame: length, checksum, body. */
export function encodeRecord(r: WalRecord): Uint8Array {
  const frame = new Uint8Array(frameSize(r));
  encodeRecordInto(r, frame, new DataView(frame.buffer), 0);
  return frame;
}

/** Bytes of the frame `r` encodes to (header included). */
export function frameSize(r: WalRecord): number {
  let size = FRAME_HEADER_BYTES + 1 + 1 + 8;
  switch (r.type) {
    case RecordType.Meta:
      size += 1 + 8 * 6;
      break;
    case RecordType.Publish:
      size += strBytes(r.id) + 8 + 1 + 8 + 2 + strBytes(r.idemKey) + strBytes(r.reason) +
        strBytes(r.origin) + 2 + 2 +
        4 + r.payload.length + 8;
      if (r.headers) { for (const h of r.headers) size += strBytes(h); }
      if (r.deliveries) { for (const d of r.deliveries) size += strBytes(d.group) + 1 + 8; }
      break;
    case RecordType.Group:
      size += strBytes(r.name) + 8;
      break;
    case RecordType.Ack:
      size += strBytes(r.group) + idsBytes(r.ids);
      break;
    case RecordType.Requeue:
      size += strBytes(r.group) + strBytes(r.id) + 1 + 8 + strBytes(r.reason);
      break;
    case RecordType.Remove:
      size += idsBytes(r.ids);
      break;
    case RecordType.Key:
      size += strBytes(r.key) + strBytes(r.id) + 8;
      break;
    case RecordType.Purge:
      break;
    case RecordType.Webhook:
      size += strBytes(r.id) + strBytes(r.url) + strBytes(r.secret) + 8 + 1 + 4 +
        (r.sealedSecret?.length ?? 0);
      break;
  }
  return size;
}

/**
 * Encodes `r` as a frame at `at` in `out` (which must have frameSize(r) bytes free there);
 * `view` is a DataView over all of `out`. Returns the frame's length.
 */
export function encodeRecordInto(
  r: WalRecord,
  out: Uint8Array,
  view: DataView,
  at: number,
): number {
  const w = new Writer(out, view, at + FRAME_HEADER_BYTES);
  w.u8(r.type);
  w.u8(RECORD_VERSION);
  w.f64(r.seq);
  switch (r.type) {
    case RecordType.Meta:
      w.u8(POLICIES.indexOf(r.policy));
      w.f64(r.retainMs);
      w.f64(r.visibilityMs);
      w.f64(r.maxMessages);
      w.f64(r.createdAt);
      w.f64(r.maxBytes);
      w.f64(r.goneSeq);
      break;
    case RecordType.Publish:
      w.str(r.id);
      w.f64(r.timestamp);
      w.u8(r.priority | (r.merge ? MERGE_BIT : 0));
      w.f64(r.expiresAt);
      w.u16(r.redriveCount);
      w.str(r.idemKey);
      w.str(r.reason);
      w.str(r.origin);
      w.f64(r.dueAt);
      w.u16(r.headers ? r.headers.length / 2 : 0);
      if (r.headers) { for (const h of r.headers) w.str(h); }
      if (r.deliveries) {
        w.u16(r.deliveries.length);
        for (const d of r.deliveries) {
          w.str(d.group);
          w.u8(d.retryCount);
          w.f64(d.dueAt);
        }
      } else {
        w.u16(ALL_GROUPS);
      }
      w.bytes(r.payload);
      break;
    case RecordType.Group:
      w.str(r.name);
      w.f64(r.createdAt);
      break;
    case RecordType.Ack:
      w.str(r.group);
      w.ids(r.ids);
      break;
    case RecordType.Requeue:
      w.str(r.group);
      w.str(r.id);
      w.u8(r.retryCount);
      w.f64(r.dueAt);
      w.str(r.reason);
      break;
    case RecordType.Remove:
      w.ids(r.ids);
      break;
    case RecordType.Key:
      w.str(r.key);
      w.str(r.id);
      w.f64(r.at);
      break;
    case RecordType.Purge:
      break;
    case RecordType.Webhook:
      w.str(r.id);
      w.str(r.url);
      w.str(r.secret);
      w.f64(r.createdAt);
      w.u8(r.active ? 1 : 0);
      w.bytes(r.sealedSecret ?? NO_BYTES);
      break;
  }
  const bodyStart = at + FRAME_HEADER_BYTES;
  view.setUint32(at, w.pos - bodyStart, true);
  view.setUint32(at + 4, crc32(out.subarray(bodyStart, w.pos)), true);
  return w.pos - at;
}

/** Checks a frame's checksum; `body` is the bytes after the 8-byte frame header. */
export function checksumOk(expected: number, body: Uint8Array): boolean {
  return crc32(body) === expected;
}

/**
 * Decodes one record body. The payload is a view into `body`; callers that keep it past the
 * life of the read buffer copy it. Throws on an unknown type or version.
 */
export function decodeRecord(body: Uint8Array): WalRecord {
  return decodeRecordAt(
    body,
    new DataView(body.buffer, body.byteOffset, body.byteLength),
    0,
    body.length,
  );
}

/**
 * Decodes the record body at `buf[start, end)` in place (replay: one DataView per read chunk,
 * no per-record views). `view` covers all of `buf`. Payload is a view into `buf`.
 */
export function decodeRecordAt(
  buf: Uint8Array,
  view: DataView,
  start: number,
  end: number,
): WalRecord {
  const r = new Reader(buf, view, start, end);
  const type = r.u8();
  const version = r.u8();
  if (version !== RECORD_VERSION) throw new Error(`unknown record version ${version}`);
  const seq = r.f64();
  switch (type) {
    case RecordType.Meta: {
      const policy = POLICIES[r.u8()] ?? "reject";
      return {
        type,
        seq,
        policy,
        retainMs: r.f64(),
        visibilityMs: r.f64(),
        maxMessages: r.f64(),
        createdAt: r.f64(),
        maxBytes: r.pos < r.end ? r.f64() : 0,
        goneSeq: r.pos < r.end ? r.f64() : seq,
      };
    }
    case RecordType.Publish: {
      const id = r.str();
      const timestamp = r.f64();
      const priorityByte = r.u8();
      const priority = priorityByte & ~MERGE_BIT;
      const merge = (priorityByte & MERGE_BIT) !== 0;
      const expiresAt = r.f64();
      const redriveCount = r.u16();
      const idemKey = r.str() || undefined;
      const reason = r.str() || undefined;
      const origin = r.str() || undefined;
      const dueAt = r.f64();
      const nHeaders = r.u16();
      let headers: string[] | undefined;
      if (nHeaders) {
        headers = [];
        for (let i = 0; i < nHeaders * 2; i++) headers.push(r.str(true));
      }
      const nDeliveries = r.u16();
      let deliveries: DeliverySpec[] | undefined;
      if (nDeliveries !== ALL_GROUPS) {
        deliveries = [];
        for (let i = 0; i < nDeliveries; i++) {
          deliveries.push({ group: r.str(), retryCount: r.u8(), dueAt: r.f64() });
        }
      }
      const payload = r.bytes();
      return {
        type,
        seq,
        id,
        timestamp,
        priority,
        merge,
        expiresAt,
        redriveCount,
        idemKey,
        reason,
        origin,
        headers,
        deliveries,
        dueAt,
        payload,
      };
    }
    case RecordType.Group:
      return { type, seq, name: r.str(), createdAt: r.f64() };
    case RecordType.Ack:
      return { type, seq, group: r.str(), ids: r.ids() };
    case RecordType.Requeue:
      return {
        type,
        seq,
        group: r.str(),
        id: r.str(),
        retryCount: r.u8(),
        dueAt: r.f64(),
        reason: r.str() || undefined,
      };
    case RecordType.Remove:
      return { type, seq, ids: r.ids() };
    case RecordType.Key:
      return { type, seq, key: r.str(), id: r.str(), at: r.f64() };
    case RecordType.Purge:
      return { type, seq };
    case RecordType.Webhook: {
      const hook: WebhookRecord = {
        type,
        seq,
        id: r.str(),
        url: r.str(),
        secret: r.str(),
        createdAt: r.f64(),
        active: r.u8() === 1,
      };
      const sealed = r.pos < r.end ? r.bytes() : NO_BYTES;
      if (sealed.length) hook.sealedSecret = sealed.slice(); // outlives the read buffer
      return hook;
    }
    default:
      throw new Error(`unknown record type ${type}`);
  }
}

class Writer {
  constructor(readonly buf: Uint8Array, readonly view: DataView, public pos: number) {}
  u8(v: number) {
    this.buf[this.pos++] = v;
  }
  u16(v: number) {
    this.view.setUint16(this.pos, v, true);
    this.pos += 2;
  }
  u32(v: number) {
    this.view.setUint32(this.pos, v, true);
    this.pos += 4;
  }
  f64(v: number) {
    this.view.setFloat64(this.pos, v, true);
    this.pos += 8;
  }
  str(s: string | undefined) {
    if (!s) {
      this.u16(0);
      return;
    }
    const start = this.pos + 2;
    const buf = this.buf;
    let i = 0;
    for (; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) break;
      buf[start + i] = c;
    }
    // Ids, names and most keys are ASCII; anything else goes through the encoder.
    const written = i === s.length ? i : encoder.encodeInto(s, buf.subarray(start)).written;
    this.u16(written);
    this.pos += written;
  }
  ids(ids: string[]) {
    this.u32(ids.length);
    for (const id of ids) this.str(id);
  }
  bytes(b: Uint8Array) {
    this.u32(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
}

/** Scratch for building short ASCII strings without a typed-array view per string. */
const codes: number[] = [];
/** Recently decoded header strings with their bytes: a log repeats the same few headers. */
const recentBytes: Uint8Array[] = [];
const recentStrings: string[] = [];
const RECENT = 4;
let recentNext = 0;

function recent(buf: Uint8Array, start: number, n: number): string | undefined {
  outer: for (let k = 0; k < recentBytes.length; k++) {
    const b = recentBytes[k]!;
    if (b.length !== n) continue;
    for (let i = 0; i < n; i++) if (b[i] !== buf[start + i]) continue outer;
    return recentStrings[k];
  }
  return undefined;
}

function remember(buf: Uint8Array, start: number, n: number, s: string): string {
  recentBytes[recentNext] = buf.slice(start, start + n);
  recentStrings[recentNext] = s;
  recentNext = (recentNext + 1) % RECENT;
  return s;
}

class Reader {
  constructor(
    readonly buf: Uint8Array,
    readonly view: DataView,
    public pos: number,
    readonly end: number,
  ) {}
  #need(n: number) {
    if (this.pos + n > this.end) throw new Error("record body ends early");
  }
  u8(): number {
    this.#need(1);
    return this.buf[this.pos++]!;
  }
  u16(): number {
    this.#need(2);
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.#need(4);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  f64(): number {
    this.#need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }
  /** A string; `repeated` ones (header names and values) come from a small cache. */
  str(repeated = false): string {
    const n = this.u16();
    this.#need(n);
    const start = this.pos;
    const buf = this.buf;
    this.pos += n;
    if (repeated && n <= 128) {
      return recent(buf, start, n) ??
        remember(buf, start, n, decoder.decode(buf.subarray(start, start + n)));
    }
    if (n === 36) {
      // A UUID (every message id): one call with its 36 codes, no array to fill first.
      const b = buf, p = start;
      let or = 0;
      for (let i = p; i < p + 36; i++) or |= b[i]!;
      if (or < 0x80) {
        // deno-fmt-ignore
        return String.fromCharCode(
          b[p]!, b[p + 1]!, b[p + 2]!, b[p + 3]!, b[p + 4]!, b[p + 5]!, b[p + 6]!, b[p + 7]!,
          b[p + 8]!, b[p + 9]!, b[p + 10]!, b[p + 11]!, b[p + 12]!, b[p + 13]!, b[p + 14]!,
          b[p + 15]!, b[p + 16]!, b[p + 17]!, b[p + 18]!, b[p + 19]!, b[p + 20]!, b[p + 21]!,
          b[p + 22]!, b[p + 23]!, b[p + 24]!, b[p + 25]!, b[p + 26]!, b[p + 27]!, b[p + 28]!,
          b[p + 29]!, b[p + 30]!, b[p + 31]!, b[p + 32]!, b[p + 33]!, b[p + 34]!, b[p + 35]!,
        );
      }
    }
    if (n <= 64) {
      // Ids and names are short ASCII: a reused array of codes beats TextDecoder and subarray.
      codes.length = n;
      let i = 0;
      for (; i < n; i++) {
        const c = buf[start + i]!;
        if (c > 0x7f) break;
        codes[i] = c;
      }
      if (i === n) return String.fromCharCode.apply(null, codes);
    }
    return decoder.decode(buf.subarray(start, start + n));
  }
  ids(): string[] {
    const n = this.u32();
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(this.str());
    return out;
  }
  bytes(): Uint8Array {
    const n = this.u32();
    this.#need(n);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
}
