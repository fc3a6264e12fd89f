/** Durations as the contract writes them: an integer and a unit (`250ms`, `30s`, `5m`, `1h`). */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const DURATION = /^(\d{1,12})(ms|s|m|h)$/;

/** Milliseconds of a duration like `30s`, or undefined when it is not one. */
export function readDuration(value: string): number | undefined {
  const m = DURATION.exec(value);
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : undefined;
}

/** Writes milliseconds back in the largest unit that divides them exactly. */
export function formatDuration(ms: number): string {
  for (const unit of ["h", "m", "s"] as const) {
    const size = UNIT_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return ms === 0 ? "0s" : `${ms}ms`;
}
