/**
 * @module The disk alarm (docs/operating.md, "Disk"), as RabbitMQ's: the free space of the data
 * directory's file system is read every DISK_CHECK_MS, and at once when a write found no space.
 * Between checks, the payloads admitted count against the free space last read, so a fast
 * publisher meets the alarm before the disk is full rather than a second later.
 * Below BROKER_DISK_FREE_LIMIT publishes are refused (507 disk_full) before anything is stored,
 * while consumes, acks and compaction go on in the room the limit keeps; publishing resumes by
 * itself once the space is back. Each worker of BROKER_WORKERS runs its own alarm: they read the
 * same file system, so they agree within one check, and each counts only its own payloads
 * between checks.
 */

import { statfs } from "node:fs/promises";
import { BrokerError } from "../errors.ts";
import type { Logger } from "../log.ts";

/** How often the free space is read. */
export const DISK_CHECK_MS = 1_000;
/** Seconds a refused publisher is asked to wait: consumers and compaction need a moment. */
const DISK_FULL_RETRY_SECONDS = 5;

/** Bytes an unprivileged process may still write on the file system that holds `dir`. */
export async function freeBytesOf(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** The data directory's free space against its limit, and whether publishes are refused. */
export class DiskAlarm {
  /** Free bytes at the last check (Infinity before the first). */
  freeBytes = Infinity;
  /** True while the free space is below the limit: publishes are refused. */
  alarm = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  #checking: Promise<void> | undefined;
  #unreadable = false;
  /** Payload bytes admitted since the last read of the free space. */
  #spent = 0;

  constructor(
    readonly dir: string,
    /** BROKER_DISK_FREE_LIMIT in bytes. */
    readonly limitBytes: number,
    readonly log: Logger,
    readonly readFree: (dir: string) => Promise<number> = freeBytesOf,
  ) {}

  /** Reads the free space now (one read at a time), and raises or clears the alarm. */
  check(): Promise<void> {
    this.#checking ??= this.#check().finally(() => this.#checking = undefined);
    return this.#checking;
  }

  async #check(): Promise<void> {
    const spent = this.#spent;
    try {
      this.freeBytes = await this.readFree(this.dir);
      this.#unreadable = false;
      this.#spent -= spent; // what was admitted during the read still counts
    } catch (e) {
      // Keep the last figure: a file system that cannot be asked says nothing about its space.
      if (!this.#unreadable) {
        this.log.warn("disk alarm: free space unknown", { data_dir: this.dir, error: e });
      }
      this.#unreadable = true;
      return;
    }
    this.#raise(this.freeBytes - this.#spent < this.limitBytes);
  }

  /** Turns the alarm on or off, with a log line when it changes. */
  #raise(below: boolean): void {
    if (below === this.alarm) return;
    this.alarm = below;
    const fields = {
      data_dir: this.dir,
      free_bytes: this.freeBytes,
      limit_bytes: this.limitBytes,
    };
    if (below) this.log.warn("disk alarm: free space below the limit; publishes refused", fields);
    else this.log.info("disk alarm cleared; publishes accepted again", fields);
  }

  /**
   * Counts `bytes` of payload about to be stored against the free space; the alarm goes on, and
   * the free space is read again, once they would take it below the limit.
   */
  spend(bytes: number): void {
    this.#spent += bytes;
    if (this.alarm || this.freeBytes - this.#spent >= this.limitBytes) return;
    this.#raise(true);
    void this.check();
  }

  /** Checks every DISK_CHECK_MS until stop(); the timer keeps no process alive. */
  start(): void {
    this.#timer ??= setInterval(() => void this.check(), DISK_CHECK_MS);
    Deno.unrefTimer(this.#timer);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Throws 507 disk_full while the alarm is on: `action` on `topic` would store payloads. */
  assertRoom(topic: string, action = "publish to"): void {
    if (!this.alarm) return;
    throw new BrokerError(
      "disk_full",
      `Cannot ${action} "${topic}": the data directory has ${this.freeBytes} bytes free, ` +
        `less than BROKER_DISK_FREE_LIMIT (${this.limitBytes}); consumers and acks go on`,
      DISK_FULL_RETRY_SECONDS,
    );
  }
}
