/**
 * Waiting between attempts: the jittered backoff of request retries, the 1 s → 32 s reconnect
 * schedule of sockets and streams (spec §8), and a sleep that an AbortSignal ends early.
 */

/** First wait of a WebSocket or event-stream reconnect. */
export const RECONNECT_FIRST_MS = 1_000;
/** Longest wait between reconnects. */
export const RECONNECT_MAX_MS = 32_000;
/**
 * Failed reconnects not reported while a broker that said it is stopping restarts (1 + 2 + 4 +
 * 8 + 16 s of waiting); a longer absence is reported again.
 */
export const RESTART_QUIET_ATTEMPTS = 5;

/** The wait before reconnect number `attempt` (0-based): 1 s, 2 s, 4 s, … 32 s, then 32 s. */
export function reconnectDelay(attempt: number): number {
  return Math.min(RECONNECT_FIRST_MS * 2 ** Math.min(attempt, 16), RECONNECT_MAX_MS);
}

/**
 * The wait before retry number `attempt` (0-based): `baseMs` doubling up to `maxMs`, the upper
 * half jittered so that clients retrying together spread out.
 */
export function retryDelay(attempt: number, baseMs: number, maxMs: number): number {
  const full = Math.min(baseMs * 2 ** Math.min(attempt, 16), maxMs);
  return full / 2 + Math.random() * (full / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
