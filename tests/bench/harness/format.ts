/**
 * @module How the bench writes figures and progress: integers with thousands separators,
 * microseconds as milliseconds, shares as percentages, and timestamped log lines on stderr.
 */

/** 12345.6 → "12,346". */
export const int = (n: number) => Math.round(n).toLocaleString("en-US");
/** Microseconds → "1.23 ms" (one decimal from 10 ms on). */
export const ms = (us: number) => `${(us / 1000).toFixed(us < 10_000 ? 2 : 1)} ms`;
/** 0.456 → "46 %". */
export const pct = (x: number) => `${Math.round(x * 100)} %`;

/** A progress line on stderr: `[bench HH:MM:SS] msg`. */
export function log(msg: string): void {
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);
}
