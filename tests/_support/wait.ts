/**
 * Test support: waiting for events instead of sleeping. `within` bounds a promise so a test
 * fails instead of hanging; an `Inbox` collects what callbacks hear and lets a test await the
 * n-th item; `eventually` repeats a check against the broker until it holds.
 */

/** Resolves as `p` does, or rejects after `ms` naming `what`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a callback heard, in order, with a way to wait until there are `n`. */
export class Inbox<T> {
  readonly items: T[] = [];
  #waiting: { n: number; resolve: () => void }[] = [];

  /** The callback to hand out. */
  readonly push = (item: T): void => {
    this.items.push(item);
    this.#waiting = this.#waiting.filter((w) => {
      if (this.items.length < w.n) return true;
      w.resolve();
      return false;
    });
  };

  /** Resolves with the items once there are at least `n` (rejects after `ms`). */
  async take(n: number, ms = 5_000, what = "items"): Promise<T[]> {
    if (this.items.length < n) {
      await within(
        new Promise<void>((resolve) => this.#waiting.push({ n, resolve })),
        ms,
        `${n} ${what} (have ${this.items.length})`,
      );
    }
    return this.items.slice(0, n);
  }
}

/**
 * Calls `check` back to back until it returns true (each call is a round trip to the broker, so
 * this is not a busy spin); rejects after `ms` naming `what`.
 */
export async function eventually(
  check: () => Promise<boolean>,
  ms: number,
  what: string,
): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms`);
  }
}
