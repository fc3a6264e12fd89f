/**
 * @module Which worker owns a topic when one broker runs several (BROKER_WORKERS,
 * docs/architecture.md "Workers"): a topic and its dead-letter queue `{topic}.dlq` go to the same
 * worker, picked by FNV-1a over the topic's characters (names are ASCII) modulo the number of
 * workers. It depends on the name and the count only, so every worker agrees without asking, and
 * a restart with another count finds each topic's file again (they share one data directory).
 */

import { DLQ_SUFFIX } from "./config.ts";

/** The topic a dead-letter queue belongs to; any other name is its own. */
export function shardTopic(name: string): string {
  return name.endsWith(DLQ_SUFFIX) ? name.slice(0, -DLQ_SUFFIX.length) : name;
}

/** The index (0 … count - 1) of the worker that owns `name`. */
export function shardOf(name: string, count: number): number {
  if (count <= 1) return 0;
  const topic = shardTopic(name);
  let h = 0x811c9dc5;
  for (let i = 0; i < topic.length; i++) {
    h ^= topic.charCodeAt(i) & 0xff;
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % count;
}

/** One worker's place among the broker's workers. */
export interface Shard {
  /** This worker's index. */
  index: number;
  /** How many workers the broker runs (BROKER_WORKERS). */
  count: number;
}

/** Whether `shard` owns `name` (always, without shards). */
export function owns(shard: Shard | undefined, name: string): boolean {
  return !shard || shardOf(name, shard.count) === shard.index;
}

/** The figures each worker publishes for the others. */
export const FIGURE_TOPICS = 0;
export const FIGURE_HELD_BYTES = 1;
const FIGURES = 2;

/**
 * What workers tell each other without a message: each worker's topic count (toward
 * BROKER_MAX_TOPICS) and held bytes (toward BROKER_MAX_MEMORY), one slot per worker and figure in
 * a SharedArrayBuffer, written only by its worker and read by every worker with Atomics. A check
 * adds the others' slots to its own count, so two workers admitting at the same moment may pass a
 * limit together by what each admitted then; neither ever waits for the other.
 */
export class SharedFigures {
  readonly #slots: BigInt64Array;

  /** The buffer for `count` workers, made once by the supervisor and given to each worker. */
  static buffer(count: number): SharedArrayBuffer {
    return new SharedArrayBuffer(count * FIGURES * 8);
  }

  constructor(buffer: SharedArrayBuffer, readonly shard: Shard) {
    this.#slots = new BigInt64Array(buffer);
  }

  /** Publishes this worker's value of `figure`. */
  set(figure: number, value: number): void {
    Atomics.store(this.#slots, this.shard.index * FIGURES + figure, BigInt(value));
  }

  /** The sum of `figure` over every other worker. */
  others(figure: number): number {
    let sum = 0;
    for (let i = 0; i < this.shard.count; i++) {
      if (i !== this.shard.index) sum += Number(Atomics.load(this.#slots, i * FIGURES + figure));
    }
    return sum;
  }
}
