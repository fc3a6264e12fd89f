/**
 * @module The durable log of one topic, as the broker sees it: the `Wal` contract, what opening
 * one takes, and the file helpers its writers share. The file writer is file_wal.ts, the one
 * without a disk memory_wal.ts, the broker's default choice open_wal.ts; record layout is in
 * record.ts, start-up replay in replay.ts.
 */

import type { PayloadLocation } from "../message.ts";
import type { PayloadFile } from "../memory/payload_file.ts";
import type { WalRecord } from "./record.ts";

const WRITE_CHUNK_BYTES = 8 * 1024 * 1024;

/** Writes all of `buf` to `file` in Deno's blocking pool, in chunks of at most 8 MiB. */
export async function writeAll(file: Deno.FsFile, buf: Uint8Array): Promise<void> {
  let pos = 0;
  while (pos < buf.length) {
    pos += await file.write(buf.subarray(pos, Math.min(buf.length, pos + WRITE_CHUNK_BYTES)));
  }
}

/** fsyncs a directory so a created or renamed file survives a crash; best effort. */
export async function syncDir(dir: string): Promise<void> {
  try {
    const d = await Deno.open(dir, { read: true });
    try {
      await d.sync();
    } finally {
      d.close();
    }
  } catch { /* some file systems refuse fsync on directories */ }
}

/**
 * Called with records right after they became durable (fsynced, or written under
 * BROKER_FSYNC=interval/never), in the order they were appended, before their appenders hear
 * so. Across WALs, calls come in the order the batches became durable, so a move between
 * topics (gated with `after`) is heard copy first. It must not throw and must not append.
 */
export type DurableHook = (records: readonly WalRecord[]) => void;

/** What opening a topic's WAL needs besides the topic's name. */
export interface WalInit {
  /** Valid length of an existing file (after replay), or 0 for a new one. */
  size: number;
  /** The reader replay used; payloads it left on disk are read through it until relocated. */
  replayed?: PayloadFile;
  /** Resolves when a file of the same name being deleted is gone. */
  after?: Promise<void>;
  /** Hears records once durable. */
  onDurable?: DurableHook;
}

/** Opens a topic's WAL: the broker's one choice of storage, which tests and the cluster can make. */
export type OpenWal = (topic: string, init: WalInit) => Wal;

/**
 * What `Wal.append` tells its caller, in the turn of the append. A fresh object per append,
 * owned by the caller (a wrapper may replace `durable` in it).
 */
export interface Appended {
  /** Resolves once the record is durable; rejects if the log has failed or is closed. */
  durable: Promise<void>;
  /** The record's frame bytes in the file (what compaction accounting counts). */
  size: number;
  /**
   * File offset where a PUBLISH record's payload bytes start, in the generation current at the
   * append (`Wal.generation` read in the same turn); undefined for other records, after a
   * refused append, and for a log without a file (MemoryWal).
   */
  payloadOffset?: number;
  /** The record's encoded frame (a copy the caller owns), when `append` was asked for it. */
  frame?: Uint8Array;
}

/**
 * The durable log of one topic. `:memory:` brokers use MemoryWal instead. The contract below is
 * what tests/lib/storage/wal_contract_test.ts checks against every implementation.
 */
export interface Wal {
  /**
   * Bytes in the file, counting frames not yet flushed: the offset the next frame gets. Grows by
   * each append's `size`; a compaction sets it to the rewritten file's length. Always 0 in
   * MemoryWal.
   */
  readonly bytes: number;
  /**
   * The error that failed the log for good (a write, fsync or open that failed), or undefined.
   * Once set, append's `durable`, barrier() and compact() reject with it. A write that found the
   * disk full (ENOSPC) does not fail a FileWal: its records wait until there is room.
   */
  readonly failed: Error | undefined;
  /**
   * Encodes and queues a record, in the calling turn. `durable` resolves when it is durable, and
   * records become durable in append order. With `after`, this record and every later one wait
   * until `after` settles (a move between topics: the copy is durable before the removal); an
   * `after` that rejects fails the log with its error. The log's DurableHook hears each record
   * before its appender does. MemoryWal has no disk: its records are durable at once, `after`
   * or not. A file-backed log frames the record at the old `bytes`: `size` bytes read there are its
   * frame, and a PUBLISH's payload bytes sit at `payloadOffset`. A failed or closed log refuses
   * the record: `durable` rejects and nothing is written. With `frame`, the answer also holds the
   * record's encoded frame, encoded once for the file and the caller both (a cluster leader ships
   * it to its followers).
   */
  append(record: WalRecord, after?: Promise<unknown>, frame?: boolean): Appended;
  /**
   * Resolves once everything appended so far is durable (for a replicated log on a leader: on
   * its disk and with a quorum of followers); at once when nothing is pending. A FileWal whose
   * records wait for disk room rejects it with the write's error rather than wait.
   */
  barrier(): Promise<void>;
  /**
   * Rewrites the file as the frames `snapshot()` yields (its point in time is when the iteration
   * starts) followed by every record appended from then on, which stay durable and in order;
   * `generation` then counts one more. MemoryWal resolves at once without taking the snapshot.
   */
  compact(snapshot: () => Iterable<Uint8Array[]>): Promise<void>;
  /**
   * Waits until what is queued is on this node's disk (not for followers), then closes; later
   * appends are refused. MemoryWal, which keeps nothing, resolves at once and accepts them still.
   */
  close(): Promise<void>;
  /** Closes and deletes the file (ReplicatedWal also ships the deletion to its followers). */
  remove(): Promise<void>;
  /** Counts compactions: a frame's offset is an offset in the file of one generation. */
  readonly generation: number;
  /**
   * Where the bytes at `offset` of generation `generation` are now: in the current file, or,
   * for a frame appended while the last compaction ran, where that compaction moved it.
   */
  locate(generation: number, offset: number): PayloadLocation | undefined;
  /** Where a payload of the file the last compaction replaced is now, if it was appended during it. */
  rebase(at: PayloadLocation): PayloadLocation | undefined;
  /** Closes the readers of replaced files; call once no message points into them. */
  releaseRetired(): void;
}
