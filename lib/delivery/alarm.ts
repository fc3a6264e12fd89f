/**
 * @module The broker's one timer: armed for the earliest deadline anything is waiting for
 * (a delay coming due, a lease or TTL ending, a long-poll's timeout, a webhook probe, the next
 * rates sample), instead of a sweep every few milliseconds. Whoever adds a deadline earlier
 * than the armed one asks for it with `request()`; after each sweep the scheduler re-arms it
 * with `set()` for the earliest deadline left. An idle broker sleeps between real deadlines.
 */

/** setTimeout's longest wait; a later deadline is re-armed when this one rings. */
const MAX_WAIT_MS = 2 ** 31 - 1;

/** One timer for the earliest requested time. */
export class Alarm {
  #at = Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running = false;

  constructor(
    private readonly now: () => number,
    /** Runs when the alarm rings, with the time then; it should `set()` the next one. */
    private readonly ring: (now: number) => void,
  ) {}

  /** When it rings next (Infinity: not armed). */
  get at(): number {
    return this.#at;
  }

  /** Starts ringing: at once (the first sweep), then as requested. */
  start(): void {
    this.#running = true;
    this.set(this.now());
  }

  /** Stops for good. */
  stop(): void {
    this.#running = false;
    this.#clear();
  }

  /** Asks to ring at `at` or earlier; nothing to do when it is armed for earlier already. */
  request(at: number): void {
    if (at < this.#at && this.#running) this.#arm(at);
  }

  /** Arms for `at` exactly, replacing what was armed (after a sweep: the earliest left). */
  set(at: number): void {
    if (this.#running && at !== this.#at) this.#arm(at);
  }

  #arm(at: number): void {
    this.#clear();
    this.#at = at;
    if (at === Infinity) return;
    // Rounded up: a timer that rings a fraction early would find nothing due and ring again.
    const wait = Math.min(MAX_WAIT_MS, Math.max(0, Math.ceil(at - this.now())));
    this.#timer = setTimeout(this.#rung, wait);
  }

  #clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Infinity;
  }

  readonly #rung = (): void => {
    this.#timer = undefined;
    this.#at = Infinity;
    if (this.#running) this.ring(this.now());
  };
}
