/**
 * @module The zero-filled tail a WAL writer of small, frequent commits keeps ahead of its log's
 * end. An fdatasync that only overwrites blocks the file already has needs no journal commit for
 * the file's size and block map: 1 KiB commits took about 20 % less CPU and 25 % less time here.
 * The fill runs between commits, once per ZERO_FILL_BYTES (about 4 ms of the disk's time here),
 * and only for a writer of small, frequent commits; one of large commits would write its bytes
 * twice. A clean close cuts the zeros off; after a crash, replay does.
 */

import type { Logger } from "../log.ts";
import { writeAll } from "./wal.ts";

/** The zero-filled stretch kept ahead of the log's end, and how little may be left before the next fill. */
const ZERO_FILL_BYTES = 1024 * 1024;
const ZERO_FILL_LOW_BYTES = 256 * 1024;
/** A writer earns the fill with this many fsynced commits in at most ZERO_FILL_WINDOW_MS... */
const ZERO_FILL_COMMITS = 64;
const ZERO_FILL_WINDOW_MS = 1_000;
/** ...averaging at most this many bytes: larger commits pay for their metadata themselves. */
const ZERO_FILL_MEAN_MAX_BYTES = 8 * 1024;
/** ZERO_FILL_BYTES of zeros, shared by every writer's fills (made at the first). */
let zeroChunk: Uint8Array | undefined;

/** One WAL file's zero-filled tail: whether its commits earn one, and how far it reaches. */
export class ZeroFill {
  /** End of the zero-filled stretch ahead of the log's end (the log's end when there is none). */
  end = 0;
  /** The current window of commits that decides #smallCommits: its start, count and bytes. */
  #windowStart = 0;
  #windowCommits = 0;
  #windowBytes = 0;
  /** Whether the last window's commits were small and frequent, so zero-filling pays. */
  #smallCommits = false;
  /** Set once a fill failed: the writer appends plainly from then on. */
  #failed = false;

  constructor(readonly path: string, readonly log: Logger) {}

  /** Whether the writer should fill before writing at `logEnd`. */
  due(logEnd: number): boolean {
    return this.#smallCommits && this.end - logEnd < ZERO_FILL_LOW_BYTES;
  }

  /** A file whose log ends at `logEnd` and has no zeros past it (just opened, or compacted). */
  reset(logEnd: number): void {
    this.end = logEnd;
  }

  /**
   * Counts a fsynced commit into the window that decides whether zero-filling pays: a window
   * closes after ZERO_FILL_COMMITS commits, or as not frequent once ZERO_FILL_WINDOW_MS passed.
   */
  countCommit(bytes: number, now: number): void {
    if (this.#windowCommits === 0) this.#windowStart = now;
    const frequent = now - this.#windowStart <= ZERO_FILL_WINDOW_MS;
    this.#windowCommits++;
    this.#windowBytes += bytes;
    if (frequent && this.#windowCommits < ZERO_FILL_COMMITS) return;
    this.#smallCommits = frequent && !this.#failed &&
      this.#windowBytes <= this.#windowCommits * ZERO_FILL_MEAN_MAX_BYTES;
    this.#windowCommits = this.#windowBytes = 0;
  }

  /**
   * Writes and syncs ZERO_FILL_BYTES of zeros past the log's end at `logEnd`, for the commits
   * after it to overwrite, then puts the file's position back at `logEnd`. Best effort: a fill
   * that fails (a full disk) leaves the writer appending plainly; only the seek back throws.
   */
  async fill(file: Deno.FsFile, logEnd: number): Promise<void> {
    const from = Math.max(this.end, logEnd);
    try {
      file.seekSync(from, Deno.SeekMode.Start);
      await writeAll(file, zeroChunk ??= new Uint8Array(ZERO_FILL_BYTES));
      await file.syncData();
      this.end = from + ZERO_FILL_BYTES;
    } catch (e) {
      this.#failed = true;
      this.#smallCommits = false;
      this.log.warn("WAL zero-fill failed; appending without it", { path: this.path, error: e });
    }
    file.seekSync(logEnd, Deno.SeekMode.Start);
  }
}
