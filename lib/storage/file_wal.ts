/**
 * @module One topic's WAL file: the group-commit writer, its life cycle and the compaction swap
 * (holding appends while the new file takes over). The zero-filled tail is zero_fill.ts, the
 * compaction's new file compaction_file.ts, where payloads moved payload_generations.ts; the
 * `Wal` contract is in wal.ts, record layout in record.ts, start-up replay in replay.ts.
 *
 * Group commit: append() queues a frame and hands back the promise of its batch. One flush at a
 * time takes every queued frame, writes them with one write and (fsync=always) one fdatasync,
 * then resolves the batch; frames queued meanwhile form the next batch. A failed flush fails
 * every later append too, on purpose: the broker then reports itself unhealthy. A write that
 * found the disk full (ENOSPC) is the exception: nothing of it counts, and its batches wait and
 * are written again once there is room (docs/operating.md, "Disk").
 */

import { concat } from "../bytes.ts";
import { FSYNC_INTERVAL_MS, type FsyncMode } from "../config.ts";
import type { Logger } from "../log.ts";
import type { PayloadLocation } from "../message.ts";
import { PayloadFile } from "../memory/payload_file.ts";
import {
  encodeRecordInto,
  FILE_HEADER_BYTES,
  fileHeader,
  frameSize,
  RecordType,
  type WalRecord,
} from "./record.ts";
import { type Appended, type DurableHook, syncDir, type Wal, writeAll } from "./wal.ts";
import { ZeroFill } from "./zero_fill.ts";
import { PayloadGenerations } from "./payload_generations.ts";
import { CompactionFile } from "./compaction_file.ts";
import { FILE_MODE } from "./data_dir_modes.ts";

const RESOLVED: Promise<void> = Promise.resolve();

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
  reject(e: unknown): void;
}

function deferred(): Deferred {
  let resolve!: () => void, reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {}); // callers that never await must not crash the process
  return { promise, resolve, reject };
}

/**
 * Writes on the event loop's thread. A write into the page cache takes microseconds; handing
 * it to Deno's blocking pool costs a thread hand-off each way, which on these VMs was 0.1 ms,
 * a third of the fdatasync after it. Only the fdatasync, which waits for the disk, goes to
 * the pool.
 */
function writeAllNow(file: Deno.FsFile, buf: Uint8Array): void {
  for (let pos = 0; pos < buf.length;) pos += file.writeSync(buf.subarray(pos));
}

/** What a writer needs from the broker. */
export interface WalOptions {
  fsync: FsyncMode;
  log: Logger;
  /** Called with the seconds each fdatasync took (for the fsync histogram). */
  onFsync?: (seconds: number) => void;
  /** Resolves when a file of the same name being deleted is gone. */
  after?: Promise<void>;
  /** The reader replay used; payloads it left on disk are read through it until relocated. */
  replayed?: PayloadFile;
  /** Hears the records of each batch right after it is durable (see DurableHook). */
  onDurable?: DurableHook;
  /** Hears that a write found the disk full (the broker's disk alarm checks at once). */
  onNoSpace?: () => void;
}

/** An append a failed or closed log refuses: nothing is written, and `durable` rejects. */
function refused(record: WalRecord, e: Error): Appended {
  return { durable: Promise.reject(e), size: frameSize(record), payloadOffset: undefined };
}

/** Frames that become durable together, encoded back to back in `buf`. */
interface Batch {
  buf: Uint8Array;
  view: DataView;
  bytes: number;
  done: Deferred;
  /** Must settle before this batch is written. */
  gate: Promise<unknown> | undefined;
  /** Its records, kept for the durable hook when there is one. */
  records: WalRecord[] | undefined;
}

/** Microtask turns a flush waits before taking its batch (see #flushLoop). */
const JOIN_TURNS = 4;
/** Largest batch written on the event loop's thread (writeAllNow); larger ones go to the pool. */
const INLINE_WRITE_MAX_BYTES = 256 * 1024;
/** Smallest batch buffer; buffers double as records arrive and are reused once written. */
const BATCH_MIN_BYTES = 4 * 1024;
/** Written buffers up to this size go back to the writer's spares; larger ones are dropped. */
const SPARE_MAX_BYTES = 4 * 1024 * 1024;
/** How many written buffers a writer keeps for its next batches. */
const SPARES = 2;

/** Longest wait between attempts to open a WAL file while no descriptor is free. */
const OPEN_RETRY_MAX_MS = 5_000;

/** First and longest wait before writing again batches that found the disk full. */
const NO_SPACE_RETRY_MIN_MS = 50;
const NO_SPACE_RETRY_MAX_MS = 1_000;

/** Whether an error is the file system out of space (ENOSPC). */
function noSpace(e: unknown): boolean {
  return e instanceof Error && /\(os error 28\)/.test(e.message);
}

/** Whether an error is the process or the system out of file descriptors (EMFILE, ENFILE). */
function outOfDescriptors(e: unknown): boolean {
  return e instanceof Error && /\(os error 2[34]\)/.test(e.message);
}

/** Makes room for `need` more bytes, copying into a larger buffer when needed. */
function reserve(b: Batch, need: number): void {
  if (b.bytes + need <= b.buf.length) return;
  const buf = new Uint8Array(Math.max(b.buf.length * 2, b.bytes + need));
  buf.set(b.buf.subarray(0, b.bytes));
  b.buf = buf;
  b.view = new DataView(buf.buffer);
}

/** The group-commit writer of one WAL file. */
export class FileWal implements Wal {
  bytes: number;
  failed: Error | undefined;
  #file: Deno.FsFile | undefined;
  #opening: Promise<void> | undefined;
  /** Batches not yet written, in file order. */
  #queue: Batch[] = [];
  #flushing: Promise<void> | undefined;
  #held = false;
  #capture: Uint8Array[] | undefined;
  #dirty = false;
  /** BROKER_FSYNC=interval: the fsync due FSYNC_INTERVAL_MS after the first unsynced write. */
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** close() has begun: batches that find the disk full fail rather than wait. */
  #stopping = false;
  /** The disk was full: the next attempt to write, and the wait before it. */
  #retry: ReturnType<typeof setTimeout> | undefined;
  #retryMs = 0;
  /** The error of the write that found the disk full, while its records wait. */
  #noSpaceError: Error | undefined;
  /** Rejected when a wait for room begins: barrier() does not wait through one. */
  #onStall: Deferred | undefined;
  #compacting: Promise<void> | undefined;
  #spares: Uint8Array[] = [];
  /** File offset of the next write: the end of the log. */
  #end = 0;
  /** The zeros kept written ahead of #end for small, frequent commits. */
  readonly #zero: ZeroFill;
  generation = 0;
  /** Where payloads are across compactions: the files' readers and the last swap's moves. */
  readonly #payloads: PayloadGenerations;

  /** `size` is the valid length of an existing file (after replay), or 0 for a new one. */
  constructor(
    readonly path: string,
    readonly dir: string,
    size: number,
    readonly opts: WalOptions,
  ) {
    // A new file gets its header when it is opened, before its first batch.
    this.bytes = Math.max(size, FILE_HEADER_BYTES);
    this.#zero = new ZeroFill(path, opts.log);
    this.#payloads = new PayloadGenerations(opts.replayed);
  }

  append(record: WalRecord, after?: Promise<unknown>, frame?: boolean): Appended {
    if (this.failed) return refused(record, this.failed);
    if (this.#closed) return refused(record, new Error(`WAL ${this.path} is closed`));
    const size = frameSize(record);
    const offset = this.bytes; // where this frame goes in the file
    let batch = this.#queue[this.#queue.length - 1];
    if (!batch || after) {
      // A gated record starts a batch of its own, so records queued before it are not held back.
      batch = this.#newBatch(after, size);
      this.#queue.push(batch);
    }
    reserve(batch, size);
    const at = batch.bytes;
    batch.bytes += encodeRecordInto(record, batch.buf, batch.view, at);
    if (this.#capture) this.#capture.push(batch.buf.slice(at, batch.bytes));
    if (this.opts.onDurable) (batch.records ??= []).push(record);
    this.bytes += size;
    if (!this.#flushing && !this.#held && this.#retry === undefined) {
      this.#flushing = this.#flushLoop();
    }
    return {
      durable: batch.done.promise,
      size,
      // The frame ends with the payload (record.ts).
      payloadOffset: record.type === RecordType.Publish
        ? offset + size - record.payload.length
        : undefined,
      // A copy: the batch's buffer is reused once written.
      frame: frame ? batch.buf.slice(at, batch.bytes) : undefined,
    };
  }

  /** A batch on a spare buffer when one fits: allocating (and zeroing) per batch showed in p99. */
  #newBatch(gate: Promise<unknown> | undefined, need: number): Batch {
    let buf = this.#spares.pop();
    if (!buf || buf.length < need) buf = new Uint8Array(Math.max(BATCH_MIN_BYTES, need));
    return {
      buf,
      view: new DataView(buf.buffer),
      bytes: 0,
      done: deferred(),
      gate,
      records: undefined,
    };
  }

  #recycle(batches: Batch[]): void {
    for (const b of batches) {
      if (this.#spares.length < SPARES && b.buf.length <= SPARE_MAX_BYTES) this.#spares.push(b.buf);
    }
  }

  barrier(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.#retry !== undefined) return Promise.reject(this.#noSpaceError);
    const last = this.#queue[this.#queue.length - 1];
    if (last) return Promise.race([last.done.promise, (this.#onStall ??= deferred()).promise]);
    if (!this.#flushing) return RESOLVED;
    return this.#flushing.then(() => this.barrier());
  }

  async #open(): Promise<Deno.FsFile> {
    if (this.#file) return this.#file;
    this.#opening ??= (async () => {
      if (this.opts.after) await this.opts.after;
      const file = await this.#openFile();
      const end = await file.seek(0, Deno.SeekMode.End);
      if (end === 0) {
        await writeAll(file, fileHeader());
        await file.syncData();
        await syncDir(this.dir); // the new file's name survives a crash too
      }
      this.#end = Math.max(end, FILE_HEADER_BYTES);
      this.#zero.reset(this.#end);
      this.#payloads.current = PayloadFile.open(this.path);
      this.#file = file;
    })();
    await this.#opening;
    return this.#file!;
  }

  /**
   * Opens the file, waiting while the process has no file descriptor free (clients holding
   * them all): nothing is written yet, so the records wait rather than fail the topic for good.
   */
  async #openFile(): Promise<Deno.FsFile> {
    for (let waitMs = 100;; waitMs = Math.min(waitMs * 2, OPEN_RETRY_MAX_MS)) {
      try {
        return await Deno.open(this.path, {
          read: true,
          write: true,
          create: true,
          mode: FILE_MODE,
        });
      } catch (e) {
        if (!outOfDescriptors(e) || this.#closed) throw e;
        this.opts.log.warn("WAL file cannot be opened yet: no file descriptor free", {
          path: this.path,
          retry_ms: waitMs,
        });
        await new Promise((res) => setTimeout(res, waitMs));
      }
    }
  }

  async #flushLoop(): Promise<void> {
    try {
      while (this.#queue.length && !this.#held && !this.failed) {
        let file: Deno.FsFile;
        try {
          file = await this.#open();
          // A few microtask turns let work that this turn set off join the batch: a parked
          // auto-ack consume woken by a publish acks one or two turns later, and then shares
          // its fsync instead of waiting for the next one.
          for (let turn = 0; turn < JOIN_TURNS; turn++) await undefined;
          const head = this.#queue[0]!;
          if (head.gate) {
            await head.gate;
            head.gate = undefined;
            continue; // more may have been queued meanwhile
          }
        } catch (e) {
          this.#fail(e as Error);
          return;
        }
        if (this.#held) return;
        if (this.#zero.due(this.#end)) {
          try {
            await this.#zero.fill(file, this.#end);
          } catch (e) {
            this.#fail(e as Error);
          }
          if (this.failed || this.#held) return; // a compaction may have begun to wait meanwhile
        }
        // Every batch up to the next gated one goes in one write and one fdatasync.
        let n = 1;
        while (n < this.#queue.length && !this.#queue[n]!.gate) n++;
        const taken = this.#queue.splice(0, n);
        let written = false;
        try {
          const data = joinBatches(taken);
          if (data.length <= INLINE_WRITE_MAX_BYTES) writeAllNow(file, data);
          else await writeAll(file, data);
          written = true;
          this.#end += data.length;
          if (this.opts.fsync === "always") {
            const t0 = performance.now();
            await file.syncData();
            const t1 = performance.now();
            this.opts.onFsync?.((t1 - t0) / 1000);
            this.#zero.countCommit(data.length, t1);
          } else {
            this.#dirty = true;
            this.#syncSoon();
          }
        } catch (e) {
          // An fsync that failed is never tried again: the kernel may have dropped its pages.
          if (!written && noSpace(e) && await this.#noSpace(file, taken, e as Error)) return;
          this.#fail(e as Error, taken);
          return;
        }
        if (this.#retryMs) {
          this.#retryMs = 0;
          this.#noSpaceError = undefined;
          this.opts.log.info("WAL writes resumed: the disk has room again", { path: this.path });
        }
        this.#recycle(taken);
        this.#resolve(taken);
      }
    } finally {
      this.#flushing = undefined;
    }
  }

  /**
   * A write found the disk full: nothing of it counts. The file is cut back to the log's end and
   * the batches go back to the head of the queue, to be written again after a wait that doubles
   * (or by a compaction, which takes the queue). False, and the log fails, when the cut fails or
   * the log is closing.
   */
  async #noSpace(file: Deno.FsFile, taken: Batch[], e: Error): Promise<boolean> {
    if (this.#stopping) return false;
    try {
      await file.truncate(this.#end);
      file.seekSync(this.#end, Deno.SeekMode.Start);
    } catch {
      return false;
    }
    this.#zero.reset(this.#end);
    this.#queue = [...taken, ...this.#queue];
    if (this.#retryMs === 0) {
      this.opts.log.warn("WAL write found the disk full; its records wait for room", {
        path: this.path,
        error: e,
      });
    }
    this.#retryMs = Math.min(
      Math.max(this.#retryMs * 2, NO_SPACE_RETRY_MIN_MS),
      NO_SPACE_RETRY_MAX_MS,
    );
    this.opts.onNoSpace?.();
    this.#noSpaceError = e;
    this.#onStall?.reject(e);
    this.#onStall = undefined;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (this.#queue.length && !this.#flushing && !this.#held && !this.failed) {
        this.#flushing = this.#flushLoop();
      }
    }, this.#retryMs);
    return true;
  }

  /** Batches are durable: the hook hears their records, then their appenders. */
  #resolve(batches: Batch[]): void {
    const hook = this.opts.onDurable;
    for (const b of batches) {
      if (hook && b.records) {
        try {
          hook(b.records);
        } catch (e) {
          this.opts.log.error("durable hook failed", { path: this.path, error: e });
        }
        b.records = undefined;
      }
      b.done.resolve();
    }
  }

  #fail(e: Error, taken: Batch[] = []): void {
    this.failed = e;
    this.opts.log.error("WAL write failed; this topic refuses writes until restart", {
      path: this.path,
      error: e,
    });
    for (const b of [...taken, ...this.#queue]) b.done.reject(e);
    this.#queue = [];
  }

  /**
   * Arms the `interval` mode's fsync, once per stretch of writes: a timer ticking every
   * FSYNC_INTERVAL_MS per topic would wake an idle broker ten times a second per topic.
   */
  #syncSoon(): void {
    if (this.opts.fsync !== "interval" || this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#held) this.#syncSoon(); // a compaction's swap is under way: a moment later
      else void this.#syncIfDirty();
    }, FSYNC_INTERVAL_MS);
  }

  async #syncIfDirty(): Promise<void> {
    if (!this.#dirty || !this.#file || this.#held) return;
    this.#dirty = false;
    try {
      const t0 = performance.now();
      await this.#file.syncData();
      this.opts.onFsync?.((performance.now() - t0) / 1000);
    } catch (e) {
      this.#fail(e as Error);
    }
  }

  compact(snapshot: () => Iterable<Uint8Array[]>): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    // One compaction at a time; a later request builds its snapshot after the earlier ends.
    const run = (this.#compacting ?? RESOLVED).then(() => this.#compactNow(snapshot));
    this.#compacting = run.finally(() => {
      if (this.#compacting === guarded) this.#compacting = undefined;
    });
    const guarded = this.#compacting;
    return run;
  }

  /** Holds the writer once nothing queued waits on another WAL (no deadlock while holding). */
  async #hold(): Promise<void> {
    while (true) {
      const gated = this.#queue.find((b) => b.gate)?.gate;
      if (gated) {
        await gated.catch(() => {});
        await (this.#flushing ?? RESOLVED);
        continue;
      }
      this.#held = true;
      await this.#flushing;
      if (!this.#queue.some((b) => b.gate)) return;
      this.#held = false;
      this.#flushing ??= this.#flushLoop();
    }
  }

  async #compactNow(snapshot: () => Iterable<Uint8Array[]>): Promise<void> {
    if (this.#closed || this.failed) return;
    // Starting the iteration fixes the snapshot's point in time: capture starts in that turn.
    const chunks = snapshot()[Symbol.iterator]();
    const first = chunks.next();
    this.#capture = [];
    const captureStart = this.bytes;
    const tmpPath = `${this.path}.compact`;
    let tmp: CompactionFile | undefined;
    let taken: Batch[] | undefined;
    let renamed = false;
    let next: PayloadFile | undefined;
    try {
      tmp = await CompactionFile.create(tmpPath);
      // Write and sync the bulk now, so the hold below only waits for the small tail.
      await tmp.writeSnapshot(first, chunks);
      // Hold the writer: no flush to the old file from here until the swap.
      await this.#hold();
      const captured = this.#capture;
      this.#capture = undefined;
      taken = this.#queue; // their frames are all in `captured`
      this.#queue = [];
      const snapshotEnd = tmp.size;
      await tmp.writeSynced(captured);
      const size = tmp.size;
      next = tmp.reader(); // the same file as tmp, whatever its name becomes
      await tmp.renameOver(this.path);
      renamed = true;
      // Payload offsets now refer to the new file: a new generation starts before anyone waits.
      this.#payloads.swap(this.generation, next, captureStart, snapshotEnd);
      next = undefined;
      // The new numbering starts in the same turn as the new generation: a record appended
      // during the await below must not pair the new generation with an old-file offset.
      this.generation++;
      this.bytes = size + sum(this.#queue);
      await syncDir(this.dir);
      if (this.#file) this.#payloads.retireWriter(this.#file);
      this.#file = tmp.file;
      this.#end = size;
      this.#zero.reset(size);
      tmp = undefined;
      this.#resolve(taken);
      taken = undefined;
    } catch (e) {
      this.#capture = undefined;
      if (renamed) {
        // The new file is in place but its state is unknown: stop writing, as a failed flush does.
        this.#fail(e as Error, taken ?? []);
      } else if (taken) {
        // The old file is intact; the taken batches still go there, ahead of newer ones.
        this.#queue = [...taken, ...this.#queue];
      }
      tmp?.file.close();
      tmp = undefined;
      await Deno.remove(tmpPath).catch(() => {});
      if (!renamed) throw e;
    } finally {
      tmp?.file.close();
      next?.close();
      this.#held = false;
      if (this.#queue.length && !this.#flushing && !this.failed) {
        this.#flushing = this.#flushLoop();
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#stopping = true;
    await this.#compacting?.catch(() => {});
    if (this.#retry !== undefined) {
      // Waiting for room: one last attempt, which fails what still finds the disk full.
      clearTimeout(this.#retry);
      this.#retry = undefined;
      if (this.#queue.length && !this.#flushing && !this.failed) {
        this.#flushing = this.#flushLoop();
      }
    }
    while (this.#flushing) await this.#flushing;
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#file && this.opts.fsync !== "never" && !this.failed) {
      await this.#file.syncData().catch(() => {});
    }
    // A clean stop leaves the file as long as its log; after a crash, replay cuts the zeros.
    if (this.#file && this.#zero.end > this.#end && !this.failed) {
      await this.#file.truncate(this.#end).catch(() => {});
    }
    this.#file?.close();
    this.#file = undefined;
    await this.#payloads.close();
  }

  locate(generation: number, offset: number): PayloadLocation | undefined {
    return this.#payloads.locate(generation, offset, this.generation);
  }

  rebase(at: PayloadLocation): PayloadLocation | undefined {
    return this.#payloads.rebase(at);
  }

  /** Closes the readers of replaced files and empties them (PayloadGenerations.releaseRetired). */
  releaseRetired(): void {
    this.#payloads.releaseRetired();
  }

  async remove(): Promise<void> {
    await this.close();
    await Deno.remove(this.path).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
    await syncDir(this.dir);
  }
}

function sum(batches: Batch[]): number {
  let n = 0;
  for (const b of batches) n += b.bytes;
  return n;
}

function joinBatches(batches: Batch[]): Uint8Array {
  if (batches.length === 1) return batches[0]!.buf.subarray(0, batches[0]!.bytes);
  return concat(batches.map((b) => b.buf.subarray(0, b.bytes)), sum(batches));
}
