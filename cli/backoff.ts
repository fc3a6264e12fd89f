/** Waiting before a reconnect: 1 s, doubling, at most 32 s (spec §8), cut short by Ctrl-C. */

/** The first wait; each failure in a row doubles it. */
export const RECONNECT_FIRST_MS = 1_000;
/** The longest wait. */
export const RECONNECT_MAX_MS = 32_000;

/** The wait before attempt `failures` (0-based) of a reconnect. */
export function reconnectDelay(failures: number): number {
  return Math.min(RECONNECT_FIRST_MS * 2 ** Math.min(failures, 16), RECONNECT_MAX_MS);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
