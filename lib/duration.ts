/** @module Durations as the contract writes them, refused with `invalid_duration` in lib. */

import { formatDuration, readDuration } from "../protocol/duration.ts";
import { BrokerError } from "./errors.ts";

export { formatDuration };

/** Parses a duration into milliseconds; throws `invalid_duration` naming the field and value. */
export function parseDuration(value: string, field: string): number {
  const ms = readDuration(value);
  if (ms === undefined) {
    throw new BrokerError(
      "invalid_duration",
      `Invalid ${field} "${value}": expected an integer and a unit (ms, s, m, h), e.g. 30s`,
    );
  }
  return ms;
}
