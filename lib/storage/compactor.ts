/**
 * @module When to rewrite a topic's WAL file and how often to try again. A file is compacted
 * once it passes BROKER_COMPACT_MIN_BYTES and is more than BROKER_COMPACT_RATIO × what it still
 * holds, or 2 × while that is at most SMALL_LIVE_BYTES; the rewrite itself is the WAL's
 * (Wal.compact) from the topic's snapshot. That bounds both sides: a restart replays at most the
 * larger of the floor and ratio × what is live (plus what was appended since the last check), and
 * since a rewritten file must grow past both again before the next rewrite, a steady publish/ack
 * stream rewrites what is live once per max(floor, (ratio - 1) × live) bytes appended: at most
 * 1/(ratio - 1) more bytes written. A small live set costs little to rewrite and its dead records
 * are most of what a restart replays, so it gets the tighter ratio; rewriting a large one (100 MiB
 * during a drain) at 2 × cost the drain a third of its speed, so it keeps the configured one.
 */

import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Topic } from "../topic.ts";

/** Wait before compacting again a topic whose last compaction left it oversized. */
const COMPACT_RETRY_MS = 1_000;
/** Live bytes up to which a topic is rewritten at SMALL_RATIO × them instead of the setting. */
export const SMALL_LIVE_BYTES = 1024 * 1024;
const SMALL_RATIO = 2;

/** The broker's compaction policy over its topics. */
export class Compactor {
  readonly #compacting = new Set<Topic>();
  /** Topics whose last compaction left them oversized, and when to try again. */
  readonly #againAt = new Map<Topic, number>();
  /** Topics whose last compaction did not shrink their file, and the file's size then. */
  readonly #noGain = new Map<Topic, number>();

  constructor(
    private readonly config: Pick<Config, "compactMinBytes" | "compactRatio">,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Starts a compaction of `topic` when it is due (called by the sweep). */
  maybeCompact(topic: Topic, now: number): void {
    // A failed log refuses compaction for good: trying again each second would only log.
    if (this.#compacting.has(topic) || topic.wal.failed) return;
    if (!this.#oversized(topic)) {
      this.#againAt.delete(topic); // in proportion again: nothing to retry
      return;
    }
    const noGain = this.#noGain.get(topic);
    if (noGain !== undefined && topic.wal.bytes < 2 * noGain) return;
    const retryAt = this.#againAt.get(topic);
    // Below the size floor only a topic whose last compaction left it oversized, once a second.
    const due = retryAt !== undefined
      ? now >= retryAt
      : topic.wal.bytes >= this.config.compactMinBytes;
    if (!due) return;
    this.compact(topic).catch((e) =>
      this.log.error("compaction failed", { topic: topic.name, error: e })
    );
  }

  /** When a retry of a compaction that left a file oversized is due (Infinity: none). */
  nextRetry(): number {
    let at = Infinity;
    for (const t of this.#againAt.values()) at = Math.min(at, t);
    return at;
  }

  /** Forgets a deleted topic. */
  forget(topic: Topic): void {
    this.#againAt.delete(topic);
    this.#noGain.delete(topic);
  }

  /** Whether a topic's file is more than its ratio × what it still holds. */
  #oversized(topic: Topic): boolean {
    const live = Math.max(topic.liveBytes, 1);
    const ratio = live <= SMALL_LIVE_BYTES ? SMALL_RATIO : this.config.compactRatio;
    return topic.wal.bytes > ratio * live;
  }

  /**
   * Rewrites a topic's file. Records appended while it runs are kept after the snapshot; when
   * they leave the file out of proportion (a batch ack during a drain), the topic is compacted
   * again a second later, even below BROKER_COMPACT_MIN_BYTES, until it is in proportion.
   */
  async compact(topic: Topic): Promise<void> {
    this.#compacting.add(topic);
    this.#againAt.delete(topic);
    const before = topic.wal.bytes;
    const t0 = performance.now();
    const seq = topic.seq;
    // A failed compaction is tried again a second later, not at every sweep.
    let failed = true;
    try {
      await topic.wal.compact(() => topic.snapshot(this.now()));
      topic.relocate();
      failed = false;
      this.log.debug("compacted", {
        topic: topic.name,
        bytes_before: before,
        bytes_after: topic.wal.bytes,
        duration_ms: Math.round(performance.now() - t0),
      });
    } finally {
      this.#compacting.delete(topic);
      // Records appended meanwhile may leave the file oversized: again soon. A snapshot alone is
      // never out of proportion; if one is, it waits until the file has doubled, so that no
      // accounting slip can make a topic rewrite its file in a loop.
      const oversized = this.#oversized(topic);
      const appended = topic.seq !== seq;
      if (oversized && (appended || failed)) {
        this.#againAt.set(topic, this.now() + COMPACT_RETRY_MS);
      } else this.#againAt.delete(topic);
      if (oversized && !appended && !failed) this.#noGain.set(topic, topic.wal.bytes);
      else this.#noGain.delete(topic);
    }
  }
}
