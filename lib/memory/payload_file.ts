/**
 * @module Payloads read back from a WAL file: large payloads (BROKER_DISK_PAYLOAD_MIN) are not
 * kept in memory, and a delivery reads them from the file they were written to. One read
 * handle per file generation (a compaction makes a new file; the old handle keeps reading the
 * old one until its messages are moved over), separate from the writer's handle, so reading
 * never moves the write position. Reads are synchronous on purpose: a positioned read from the
 * page cache took 30 µs for 256 KiB and 233 µs for 2 MiB here, about what Base64 encoding the
 * same bytes costs, and it keeps delivery, filters, moves and compaction free of races.
 */

/** Largest stretch one prefetch reads (a consume answer holds at most 4 MiB of payload). */
const PREFETCH_MAX_BYTES = 4 * 1024 * 1024;

/** One WAL file generation, open for reading payloads. */
export class PayloadFile {
  #file: Deno.FsFile | undefined;
  /** The stretch the last prefetch read, and its file offset: reads inside it are views. */
  #window: Uint8Array | undefined;
  #windowAt = 0;
  #spare = new Uint8Array(0);

  private constructor(readonly path: string, file: Deno.FsFile) {
    this.#file = file;
  }

  /**
   * Opens `path` for reading; the handle follows the file, not the name, across renames.
   * Synchronous like the reads: replay opens one per topic before the broker listens.
   */
  static open(path: string): PayloadFile {
    return new PayloadFile(path, Deno.openSync(path, { read: true }));
  }

  /**
   * `length` bytes at `offset` of the file: a view of the last prefetched stretch when it holds
   * them (the bytes of a WAL file never change once written), valid until the next prefetch
   * reuses its buffer, else a read of their own. `own`: always a buffer of their own, for bytes
   * kept past the current turn.
   */
  read(offset: number, length: number, own = false): Uint8Array {
    const w = this.#window;
    if (!own && w && offset >= this.#windowAt && offset + length <= this.#windowAt + w.length) {
      return w.subarray(offset - this.#windowAt, offset - this.#windowAt + length);
    }
    return this.#read(offset, length);
  }

  /** Reads [from, to) in one go, so that the payloads in it are then read without a syscall. */
  prefetch(from: number, to: number): void {
    const w = this.#window;
    if (w && from >= this.#windowAt && to <= this.#windowAt + w.length) return;
    // One buffer, reused: a new one per batch was most of what reading from disk cost (GC).
    if (this.#spare.length < to - from) this.#spare = new Uint8Array(to - from);
    this.#window = this.#read(from, to - from, this.#spare.subarray(0, to - from));
    this.#windowAt = from;
  }

  #read(offset: number, length: number, into?: Uint8Array): Uint8Array {
    const file = this.#file;
    if (!file) throw new Error(`Cannot read a payload of ${this.path}: its reader is closed`);
    const out = into ?? new Uint8Array(length);
    file.seekSync(offset, Deno.SeekMode.Start);
    for (let got = 0; got < length;) {
      const n = file.readSync(out.subarray(got));
      if (n === null) throw new Error(`${this.path}: the payload at ${offset} runs past the end`);
      got += n;
    }
    return out;
  }

  close(): void {
    this.#file?.close();
    this.#file = undefined;
    this.#window = undefined;
  }
}

/** What prefetchPayloads needs of a message (lib/message.ts's StoredMessage). */
export interface FilePayload {
  readonly onDisk: boolean;
  readonly file: PayloadFile | undefined;
  readonly fileOffset: number;
  readonly payloadBytes: number;
}

/**
 * Before a batch of payloads is read (a consume answer): when two or more of them are in one
 * file and close together (FIFO order keeps them next to each other in the WAL), reads their
 * whole stretch with one read instead of one read each.
 */
export function prefetchPayloads(messages: Iterable<FilePayload>): void {
  let file: PayloadFile | undefined;
  let from = Infinity, to = 0, bytes = 0, n = 0;
  for (const m of messages) {
    if (!m.onDisk || !m.file || (file && m.file !== file)) continue;
    file = m.file;
    from = Math.min(from, m.fileOffset);
    to = Math.max(to, m.fileOffset + m.payloadBytes);
    bytes += m.payloadBytes;
    n++;
  }
  // Worth it when the stretch is mostly these payloads (their records' headers in between).
  if (!file || n < 2 || to - from > PREFETCH_MAX_BYTES || to - from > 2 * bytes + 64 * 1024) {
    return;
  }
  file.prefetch(from, to);
}
