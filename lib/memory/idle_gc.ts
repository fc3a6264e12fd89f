/**
 * @module Gives memory back soon after a burst. V8 collects its old generation when allocation
 * needs room, so a heap that goes quiet keeps what the last burst left behind until V8's memory
 * reducer sees five seconds of low allocation: 6–30 s after the burst here. One second after
 * publishing 100,000 messages of 1 KiB the broker's RSS was 1.7× their payload, and 1.35× once
 * collected; after 200 MiB of 2 MiB payloads were purged, RSS stayed 240 MiB above idle for 30 s.
 * So once no request has finished for IDLE_MS and either what V8 holds (the JS heap and the
 * ArrayBuffers' memory outside it, where request bodies and payloads live) has grown by at least
 * GROWTH_BYTES since the last collection, or the messages the broker holds have shrunk by as much
 * (a purge, a drain: garbage that V8's figures cannot show before a collection), the broker asks
 * for one full collection: a pause of about 60 ms with 100,000 messages held, taken while nothing
 * is being answered. That needs V8's `--expose-gc`, which the start task passes; without it
 * nothing is collected early.
 */

/** How long no request must finish before the heap counts as idle. */
export const IDLE_MS = 250;
/** Growth of what V8 holds, or shrinking of what messages hold, worth a full collection. */
export const GROWTH_BYTES = 16 * 1024 * 1024;

export interface IdleGcOptions {
  /** A full, synchronous collection (see exposedGc). */
  collect: () => void;
  /** Bytes V8 holds: the JS heap in use and ArrayBuffers' memory (`external`). */
  used?: () => number;
  /** Bytes the broker's messages hold (its memory budget's count); none: not looked at. */
  held?: () => number;
  idleMs?: number;
  growthBytes?: number;
  /** Hears each decision taken once idle: whether it collected, the bytes before, the pause. */
  onIdle?: (collected: boolean, used: number, pauseMs: number) => void;
}

/** Collects once after each burst, when the requests stop. */
export class IdleGc {
  readonly #collect: () => void;
  readonly #used: () => number;
  readonly #held: () => number;
  readonly #idleMs: number;
  readonly #growthBytes: number;
  readonly #onIdle?: (collected: boolean, used: number, pauseMs: number) => void;
  #finished = 0;
  #finishedAtArm = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Bytes V8 held after the last collection (or lower, when V8 collected since). */
  #floor: number;
  /** Bytes messages held at the last collection (or higher, when more were held since). */
  #peak: number;

  constructor(o: IdleGcOptions) {
    this.#collect = o.collect;
    this.#used = o.used ?? v8Used;
    this.#held = o.held ?? (() => 0);
    this.#idleMs = o.idleMs ?? IDLE_MS;
    this.#growthBytes = o.growthBytes ?? GROWTH_BYTES;
    this.#onIdle = o.onIdle;
    this.#floor = this.#used();
    this.#peak = this.#held();
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
    const used = this.#used();
    const held = this.#held();
    const due = used - this.#floor >= this.#growthBytes || this.#peak - held >= this.#growthBytes;
    let pauseMs = 0;
    if (due) {
      const t0 = performance.now();
      this.#collect();
      pauseMs = performance.now() - t0;
      this.#floor = this.#used();
      this.#peak = held;
    } else {
      this.#floor = Math.min(this.#floor, used);
      this.#peak = Math.max(this.#peak, held);
    }
    this.#onIdle?.(due, used, pauseMs);
  };
}

function v8Used(): number {
  const m = Deno.memoryUsage();
  return m.heapUsed + m.external;
}

/** V8's `gc` as a full collection, when the runtime was started with `--expose-gc`. */
export function exposedGc(): (() => void) | undefined {
  const gc = (globalThis as { gc?: (options: object) => unknown }).gc;
  if (typeof gc !== "function") return undefined;
  return () => void gc({ type: "major", execution: "sync" });
}
