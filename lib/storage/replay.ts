/**
 * @module Start-up replay of one WAL file, and what it does with damage. Every whole record is
 * applied in file order. A damaged stretch (a flipped bit, a zeroed block, a torn write) is
 * skipped: replay resynchronises on the next frame whose length, type, version and checksum
 * hold, so one bad record never takes the records after it along. The bytes taken out are kept
 * in `<topic>.wal.cut-<ms>` for an operator, never deleted, and each stretch is logged.
 * A torn tail is cut off the file; damage in the middle makes replay rewrite the file without
 * it (a temp file, fsync, rename), so later appends and replays see a clean log. Zeros at the
 * end are the writer's zero-filled stretch (FileWal.#zeroFill), not damage: they are cut off
 * silently (a torn record before them is cut with them).
 *
 * What a skipped record means follows from the record: a lost PUBLISH is a message gone (its
 * bytes are in the cut file); a lost ACK, REMOVE or PURGE brings messages back (redelivered:
 * at-least-once, never a silent loss); a lost REQUEUE leaves a lower retry count; a lost META
 * leaves the topic's default settings; a lost KEY ends that idempotency key's window early.
 *
 * Replay reads synchronously on purpose: it runs before the broker listens, with nothing else to
 * run meanwhile, and each asynchronous open, stat or read was a round trip through the blocking
 * pool that took 0.5–6 ms at start-up here (9–16 ms of a restart of four topics).
 */

import { Buffer } from "node:buffer";
import type { Logger } from "../log.ts";
import { syncDir } from "./wal.ts";
import { FILE_MODE } from "./data_dir_modes.ts";
import {
  checksumOk,
  decodeRecordAt,
  FILE_HEADER_BYTES,
  FILE_VERSION,
  FRAME_HEADER_BYTES,
  MAX_RECORD_BYTES,
  readFileHeader,
  RECORD_VERSION,
  RecordType,
  type WalRecord,
} from "./record.ts";

const READ_CHUNK_BYTES = 8 * 1024 * 1024;
/** Smallest record body: type, version and a sequence number. */
const MIN_BODY_BYTES = 10;
const TORN = "torn record at the end of the file";

/** A stretch of the file replay could not read, and why. */
export interface Skipped {
  offset: number;
  bytes: number;
  reason: string;
}

/** What replay found in one file. */
export interface ReplayResult {
  records: number;
  /** Size of the file after replay: its whole, valid records and the header. */
  validBytes: number;
  /** Why the tail was cut, when it was. */
  cut?: string;
  cutBytes?: number;
  /** Every stretch taken out of the file, the tail included. */
  skipped: Skipped[];
  /** Where the bytes taken out were kept. */
  keptIn?: string;
}

/** A window of the file in memory, moved forward (or grown) as replay reads on. */
class Window {
  buf: Uint8Array;
  view: DataView;
  /** File offset of buf[0]. */
  start = 0;
  len = 0;

  /** Opens `path` for replay (read and write: salvage cuts damage out of it). */
  static open(path: string): Window {
    const file = Deno.openSync(path, { read: true, write: true });
    try {
      return new Window(file, file.statSync().size);
    } catch (e) {
      file.close();
      throw e;
    }
  }

  private constructor(readonly file: Deno.FsFile, readonly size: number) {
    this.buf = new Uint8Array(Math.min(READ_CHUNK_BYTES, Math.max(size, FILE_HEADER_BYTES)));
    this.view = new DataView(this.buf.buffer);
  }

  /** Whether file bytes [at, at + n) are in the window now. */
  holds(at: number, n: number): boolean {
    return at >= this.start && at + n <= this.start + this.len;
  }

  /** Makes file bytes [at, at + n) readable; false when the file ends first. */
  load(at: number, n: number): boolean {
    if (at + n > this.size) return false;
    if (this.holds(at, n)) return true;
    if (n > this.buf.length) {
      this.buf = new Uint8Array(n);
      this.view = new DataView(this.buf.buffer);
    }
    this.file.seekSync(at, Deno.SeekMode.Start);
    const want = Math.min(this.buf.length, this.size - at);
    let got = 0;
    while (got < want) {
      const r = this.file.readSync(this.buf.subarray(got, want));
      if (r === null) break;
      got += r;
    }
    this.start = at;
    this.len = got;
    return this.holds(at, n);
  }

  u32(at: number): number {
    return this.view.getUint32(at - this.start, true);
  }

  byte(at: number): number {
    return this.buf[at - this.start]!;
  }

  body(at: number, n: number): Uint8Array {
    return this.buf.subarray(at - this.start, at - this.start + n);
  }
}

/**
 * Reads a WAL file record by record into `apply` (with each frame's size and offset in the file
 * as read), skipping and keeping damaged stretches (see the module note); throws on a file or
 * record version it does not know, so nothing is lost silently. Payloads handed to `apply` are
 * views into a reused buffer: copy what you keep.
 */
export async function replayFile(
  path: string,
  apply: (record: WalRecord, frameBytes: number, frameAt: number) => void,
  log: Logger,
): Promise<ReplayResult> {
  const win = Window.open(path);
  const { file, size } = win;
  try {
    win.load(0, Math.min(size, FILE_HEADER_BYTES));
    if (size === 0) return { records: 0, validBytes: 0, skipped: [] };
    const version = readFileHeader(win.body(0, Math.min(size, FILE_HEADER_BYTES)));
    if (typeof version === "string") {
      if (size < FILE_HEADER_BYTES) {
        // A crash while the file was being created: nothing in it was ever acknowledged.
        log.warn("WAL tail cut off", { path, reason: version, valid_bytes: 0, cut_bytes: size });
        await file.truncate(0);
        const skipped = [{ offset: 0, bytes: size, reason: version }];
        return { records: 0, validBytes: 0, cut: version, cutBytes: size, skipped };
      }
      throw new Error(`Cannot replay ${path}: ${version}`);
    }
    if (version !== FILE_VERSION) {
      throw new Error(`Cannot replay ${path}: unknown WAL format version ${version}`);
    }

    let records = 0;
    const skipped: Skipped[] = [];
    let pos = FILE_HEADER_BYTES;
    let end = size; // where the log ends: before the writer's zero-filled stretch, if any
    while (pos < size) {
      const frame = frameIn(win, pos) ?? frameAt(win, pos);
      if (typeof frame === "number") {
        const start = pos + FRAME_HEADER_BYTES - win.start;
        const record = decodeRecordAt(win.buf, win.view, start, start + frame - FRAME_HEADER_BYTES);
        apply(record, frame, pos);
        records++;
        pos += frame;
        continue;
      }
      if (zerosFrom(win, pos)) {
        end = pos;
        break;
      }
      const next = resync(win, pos + 1);
      skipped.push({ offset: pos, bytes: next - pos, reason: frame });
      pos = next;
    }
    // Not synced: a crash before the next fdatasync brings back zeros that the next replay cuts.
    if (end < size) file.truncateSync(end);
    if (!skipped.length) return { records, validBytes: end, skipped };
    return { records, ...await salvage(file, path, end, skipped, log) };
  } finally {
    file.close();
  }
}

/**
 * The byte length of the whole, valid frame at `pos`, or why there is none; undefined when the
 * window does not hold it yet. Synchronous: replay's hot loop awaits only to read more.
 */
function frameIn(win: Window, pos: number): number | string | undefined {
  const at = pos - win.start;
  if (at < 0 || at + FRAME_HEADER_BYTES > win.len) return undefined;
  const len = win.view.getUint32(at, true);
  if (len < MIN_BODY_BYTES || len > MAX_RECORD_BYTES) return `record length ${len} is impossible`;
  const end = at + FRAME_HEADER_BYTES + len;
  if (end > win.len) return undefined;
  if (
    !checksumOk(win.view.getUint32(at + 4, true), win.buf.subarray(at + FRAME_HEADER_BYTES, end))
  ) {
    return "checksum mismatch";
  }
  return FRAME_HEADER_BYTES + len;
}

/** frameIn, reading the file as needed. */
function frameAt(win: Window, pos: number): number | string {
  const known = frameIn(win, pos);
  if (known !== undefined) return known;
  if (!win.load(pos, FRAME_HEADER_BYTES)) return TORN;
  const len = win.u32(pos);
  if (len >= MIN_BODY_BYTES && len <= MAX_RECORD_BYTES) {
    if (!win.load(pos, FRAME_HEADER_BYTES + len)) return TORN;
  }
  return frameIn(win, pos)!;
}

/**
 * Whether every byte from `from` to the end of the file is zero: the writer's zero-filled
 * stretch. Compared natively (`Buffer.compare`): a byte loop over 1 MiB ran cold at start-up,
 * 5–10 ms of a restart.
 */
function zerosFrom(win: Window, from: number): boolean {
  for (let at = from; at < win.size;) {
    const n = Math.min(READ_CHUNK_BYTES, win.size - at);
    win.load(at, n);
    const zeros = new Uint8Array(n);
    if (Buffer.compare(win.body(at, n), zeros) !== 0) return false;
    at += n;
  }
  return true;
}

/**
 * The offset of the next whole, valid frame at or after `from`, or the file size. A candidate
 * must have a possible length, a known type, the current record version and a matching
 * checksum, and decode: a false match in damaged bytes is about one in 2^40.
 */
function resync(win: Window, from: number): number {
  const min = FRAME_HEADER_BYTES + MIN_BODY_BYTES;
  for (let at = from; at + min <= win.size; at++) {
    if (!win.holds(at, min)) win.load(at, min);
    const len = win.u32(at);
    if (len < MIN_BODY_BYTES || len > MAX_RECORD_BYTES) continue;
    if (at + FRAME_HEADER_BYTES + len > win.size) continue;
    const type = win.byte(at + FRAME_HEADER_BYTES);
    if (type < RecordType.Meta || type > RecordType.Webhook) continue;
    if (win.byte(at + FRAME_HEADER_BYTES + 1) !== RECORD_VERSION) continue;
    if (typeof frameAt(win, at) !== "number") continue;
    try {
      const start = at + FRAME_HEADER_BYTES - win.start;
      decodeRecordAt(win.buf, win.view, start, start + len);
    } catch {
      continue;
    }
    return at;
  }
  return win.size;
}

/**
 * Copies the skipped stretches to `<path>.cut-<ms>`, then takes them out of the file: a tail
 * by truncating, anything else by rewriting the file without them. Logs each stretch.
 */
async function salvage(
  file: Deno.FsFile,
  path: string,
  size: number,
  skipped: Skipped[],
  log: Logger,
): Promise<Omit<ReplayResult, "records">> {
  const keptIn = `${path}.cut-${Date.now()}`;
  const out = await Deno.open(keptIn, { write: true, createNew: true, mode: FILE_MODE });
  try {
    for (const s of skipped) await copyRange(file, out, s.offset, s.bytes);
    await out.syncData();
  } finally {
    out.close();
  }
  const last = skipped[skipped.length - 1]!;
  const tail = last.offset + last.bytes === size ? last : undefined;
  for (const s of skipped) {
    if (s === tail) continue;
    log.warn("WAL damage skipped", {
      path,
      offset: s.offset,
      bytes: s.bytes,
      reason: s.reason,
      kept_in: keptIn,
    });
  }
  let validBytes: number;
  if (tail && skipped.length === 1) {
    validBytes = tail.offset;
    await file.truncate(validBytes);
    await file.syncData();
  } else {
    validBytes = await rewriteWithout(file, path, size, skipped);
  }
  if (tail) {
    log.warn("WAL tail cut off", {
      path,
      reason: tail.reason,
      valid_bytes: validBytes,
      cut_bytes: tail.bytes,
      kept_in: keptIn,
    });
  }
  await syncDir(path.slice(0, path.lastIndexOf("/")) || ".");
  return tail
    ? { validBytes, cut: tail.reason, cutBytes: tail.bytes, skipped, keptIn }
    : { validBytes, skipped, keptIn };
}

/** Writes the file without the skipped stretches to `<path>.salvage` and renames it over. */
async function rewriteWithout(
  file: Deno.FsFile,
  path: string,
  size: number,
  skipped: Skipped[],
): Promise<number> {
  const tmpPath = `${path}.salvage`;
  const tmp = await Deno.open(tmpPath, {
    write: true,
    create: true,
    truncate: true,
    mode: FILE_MODE,
  });
  let written = 0;
  try {
    let pos = 0;
    for (const s of [...skipped, { offset: size, bytes: 0, reason: "" }]) {
      await copyRange(file, tmp, pos, s.offset - pos);
      written += s.offset - pos;
      pos = s.offset + s.bytes;
    }
    await tmp.syncData();
  } finally {
    tmp.close();
  }
  await Deno.rename(tmpPath, path);
  return written;
}

async function copyRange(from: Deno.FsFile, to: Deno.FsFile, offset: number, n: number) {
  const buf = new Uint8Array(Math.min(n, READ_CHUNK_BYTES));
  await from.seek(offset, Deno.SeekMode.Start);
  for (let done = 0; done < n;) {
    const r = await from.read(buf.subarray(0, Math.min(buf.length, n - done)));
    if (r === null) throw new Error(`unexpected end of file at ${offset + done}`);
    let w = 0;
    while (w < r) w += await to.write(buf.subarray(w, r));
    done += r;
  }
}
