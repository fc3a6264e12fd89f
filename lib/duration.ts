/** @module Durations as the contract writes them: an integer and a unit (`250ms`, `30s`, `5m`, `1h`). */

import { BrokerError } from "./errors.ts";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const DURATION = /^(\d{1,12})(ms|s|m|h)$/;

/** Parses a duration into milliseconds; throws `invalid_duration` naming the field and value. */
export function parseDuration(value: string, field: string): number {
  const m = DURATION.exec(value);
  if (!m) {
    throw new BrokerError(
      "invalid_duration",
      `Invalid ${field} "${value}": expected an integer and a unit (ms, s, m, h), e.g. 30s`,
    );
  }
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}

/** Writes milliseconds back in the largest unit that divides them exactly. */
export function formatDuration(ms: number): string {
  for (const unit of ["h", "m", "s"] as const) {
    const size = UNIT_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return ms === 0 ? "0s" : `${ms}ms`;
}
