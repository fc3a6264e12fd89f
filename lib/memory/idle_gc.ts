/**
 * @module Gives memory back soon after a burst. V8 collects its old generation when allocation
 * needs room, so a heap that goes quiet keeps what the last burst left behind until V8's memory
 * reducer sees five seconds of low allocation: 6–30 s after the burst here. One second after
 * publishing 100,000 messages of 1 KiB the broker's RSS was 1.7× their payload, and 1.35× once
 * collected. So once no request has finished for IDLE_MS and the JS heap has grown by at least
 * GROWTH_BYTES since the last collection, the broker asks for one full collection: a pause of
 * about 60 ms with 100,000 messages held, taken while nothing is being answered. That needs V8's
 * `--expose-gc`, which the start task passes; without it nothing is collected early.
 */

/** How long no request must finish before the heap counts as idle. */
export const IDLE_MS = 250;
/** Growth of the JS heap since the last collection that is worth a full collection. */
export const GROWTH_BYTES = 16 * 1024 * 1024;

export interface IdleGcOptions {
  /** A full, synchronous collection (see exposedGc). */
  collect: () => void;
  /** Bytes in use on the JS heap. */
  heapUsed?: () => number;
  idleMs?: number;
  growthBytes?: number;
  /** Hears each decision taken once idle: whether it collected, the heap before, the pause. */
  onIdle?: (collected: boolean, heapUsed: number, pauseMs: number) => void;
}

/** Collects once after each burst, when the requests stop. */
export class IdleGc {
  readonly #collect: () => void;
  readonly #heapUsed: () => number;
  readonly #idleMs: number;
  readonly #growthBytes: number;
  readonly #onIdle?: (collected: boolean, heapUsed: number, pauseMs: number) => void;
  #finished = 0;
  #finishedAtArm = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Heap in use after the last collection (or lower, when V8 collected since). */
  #floor: number;

  constructor(o: IdleGcOptions) {
    this.#collect = o.collect;
    this.#heapUsed = o.heapUsed ?? (() => Deno.memoryUsage().heapUsed);
    this.#idleMs = o.idleMs ?? IDLE_MS;
    this.#growthBytes = o.growthBytes ?? GROWTH_BYTES;
    this.#onIdle = o.onIdle;
    this.#floor = this.#heapUsed();
  }

  /** A request finished: the heap is not idle, and is looked at again once it is. */
  touch(): void {
    this.#finished++;
    if (this.#timer === undefined) this.#arm();
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    this.#finishedAtArm = this.#finished;
    this.#timer = setTimeout(this.#check, this.#idleMs);
  }

  readonly #check = (): void => {
    this.#timer = undefined;
    if (this.#finished !== this.#finishedAtArm) return this.#arm(); // still busy
    const used = this.#heapUsed();
    const due = used - this.#floor >= this.#growthBytes;
    let pauseMs = 0;
    if (due) {
      const t0 = performance.now();
      this.#collect();
      pauseMs = performance.now() - t0;
      this.#floor = this.#heapUsed();
    } else {
      this.#floor = Math.min(this.#floor, used);
    }
    this.#onIdle?.(due, used, pauseMs);
  };
}

/** V8's `gc` as a full collection, when the runtime was started with `--expose-gc`. */
export function exposedGc(): (() => void) | undefined {
  const gc = (globalThis as { gc?: (options: object) => unknown }).gc;
  if (typeof gc !== "function") return undefined;
  return () => void gc({ type: "major", execution: "sync" });
}
