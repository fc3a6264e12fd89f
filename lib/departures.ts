/**
 * @module What has left a topic, for streams that resume (GET /stream with Last-Event-ID): the
 * highest sequence number of a message the topic no longer holds (acked by every group,
 * expired, dropped by drop-oldest, moved, purged), and the most recent departures one by one,
 * so that a resume can say how many messages it missed. Replay rebuilds both from the records
 * in the WAL; a compaction drops those records, so its META keeps the highest (`goneSeq`),
 * below which departures are no longer told apart.
 */

/** Departures a topic keeps one by one; older ones only raise `floor`. */
export const DEPARTURES_KEPT = 4096;

/** The departures of one topic. */
export class Departures {
  /** The highest sequence number of a message that has left (0: none has). */
  max = 0;
  /** Departures at or below this sequence number may be missing from the ones kept. */
  floor = 0;
  /** Sequence numbers of recent departures, in the order they left; a ring once full. */
  #seqs: number[] = [];
  #next = 0;

  /** The message stored as `seq` has left the topic. */
  add(seq: number): void {
    if (seq > this.max) this.max = seq;
    const seqs = this.#seqs;
    if (seqs.length < DEPARTURES_KEPT) {
      seqs.push(seq);
      return;
    }
    // The oldest departure is forgotten: every one still unknown is at or below the floor.
    const old = seqs[this.#next]!;
    if (old > this.floor) this.floor = old;
    seqs[this.#next] = seq;
    this.#next = (this.#next + 1) % DEPARTURES_KEPT;
  }

  /**
   * Messages up to `seq` may have left without a trace (a compacted file's META says so): they
   * count as gone, and no longer one by one.
   */
  goneUpTo(seq: number): void {
    if (seq > this.max) this.max = seq;
    if (seq > this.floor) this.floor = seq;
  }

  /**
   * How many messages stored in (`after`, `upTo`] have left: 0 when none has, undefined when
   * some have but their number is no longer known.
   */
  between(after: number, upTo: number): number | undefined {
    if (this.max <= after) return 0;
    if (after < this.floor) return undefined;
    let n = 0;
    for (const s of this.#seqs) if (s > after && s <= upTo) n++;
    return n;
  }
}
