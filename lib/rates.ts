/**
 * @module Rates over the last minutes, for the dashboard's charts: every RATE_INTERVAL_MS the
 * sweep samples the counters of every topic and the broker's totals into a ring of
 * RATE_SAMPLES; a rate is the difference of two neighbouring samples over their time.
 */

import type { Stats } from "./stats.ts";
import type { Topic, TopicCounters, TopicView } from "./topic.ts";

/** How often the counters are sampled. */
export const RATE_INTERVAL_MS = 5_000;
/** Samples kept: 61 samples give 60 intervals, five minutes. */
export const RATE_SAMPLES = 61;

/** The counters a rate is kept for, in the order a sample stores them. */
export const RATE_FIELDS = [
  "published",
  "delivered",
  "acked",
  "requeued",
  "deadLettered",
  "expired",
] as const satisfies readonly (keyof TopicCounters)[];
type RateField = typeof RATE_FIELDS[number];

/** Events per second over one interval that ended at `at`. */
export type RatePoint = { at: number } & Record<RateField, number>;

const WIDTH = RATE_FIELDS.length + 1; // the time, then one slot per field

/** A ring of samples of one set of counters, in one typed array. */
class Ring {
  readonly #slots = new Float64Array(RATE_SAMPLES * WIDTH);
  #next = 0;
  #count = 0;

  push(at: number, c: TopicCounters): void {
    const base = this.#next * WIDTH;
    this.#slots[base] = at;
    for (let i = 0; i < RATE_FIELDS.length; i++) this.#slots[base + 1 + i] = c[RATE_FIELDS[i]!];
    this.#next = (this.#next + 1) % RATE_SAMPLES;
    this.#count = Math.min(this.#count + 1, RATE_SAMPLES);
  }

  /** The rates between neighbouring samples, oldest first. */
  points(): RatePoint[] {
    const out: RatePoint[] = [];
    for (let k = 1; k < this.#count; k++) out.push(this.#point(k));
    return out;
  }

  /** The rates of the last interval, or undefined before a second sample. */
  latest(): RatePoint | undefined {
    return this.#count > 1 ? this.#point(this.#count - 1) : undefined;
  }

  /** The rates between the (k-1)th and kth samples kept, counted from the oldest. */
  #point(k: number): RatePoint {
    const first = this.#next - this.#count + RATE_SAMPLES;
    const a = ((first + k - 1) % RATE_SAMPLES) * WIDTH;
    const b = ((first + k) % RATE_SAMPLES) * WIDTH;
    const seconds = (this.#slots[b]! - this.#slots[a]!) / 1000;
    const p = { at: this.#slots[b]! } as RatePoint;
    for (let i = 0; i < RATE_FIELDS.length; i++) {
      const d = this.#slots[b + 1 + i]! - this.#slots[a + 1 + i]!;
      p[RATE_FIELDS[i]!] = seconds > 0 ? Math.max(0, d) / seconds : 0;
    }
    return p;
  }
}

/** The broker's rate history: totals and one ring per topic. */
export class Rates {
  readonly #totals = new Ring();
  // Keyed by the Topic object: a topic deleted and created again starts a new history.
  readonly #topics = new Map<TopicView, Ring>();
  #due = -Infinity;

  constructor(
    private readonly stats: Stats,
    private readonly topics: () => Iterable<Topic>,
  ) {}

  /** Takes a sample when one is due (called from the sweep). */
  sample(now: number): void {
    if (now < this.#due) return;
    this.#due = now + RATE_INTERVAL_MS;
    this.#totals.push(now, this.stats.totals);
    const alive = new Set<TopicView>();
    for (const t of this.topics()) {
      alive.add(t);
      let ring = this.#topics.get(t);
      if (!ring) this.#topics.set(t, ring = new Ring());
      ring.push(now, t.counters);
    }
    for (const t of this.#topics.keys()) if (!alive.has(t)) this.#topics.delete(t);
  }

  /** When the next sample is due. */
  get due(): number {
    return this.#due;
  }

  /** The broker's rates, oldest first. */
  totals(): RatePoint[] {
    return this.#totals.points();
  }

  /** One topic's rates, oldest first; empty until it has two samples. */
  of(topic: TopicView): RatePoint[] {
    return this.#topics.get(topic)?.points() ?? [];
  }

  /** One topic's latest rates, or undefined before its second sample. */
  latest(topic: TopicView): RatePoint | undefined {
    return this.#topics.get(topic)?.latest();
  }
}
