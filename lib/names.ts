/** @module Topic and group names, checked before they reach the WAL's file names. */

import { DLQ_SUFFIX } from "./config.ts";
import { BrokerError } from "./errors.ts";

const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;

function isName(name: string): boolean {
  return NAME.test(name) && !name.includes("..");
}

/**
 * Throws `invalid_name` unless `name` is 1–200 of `A-Z a-z 0-9 . _ -`, no leading `.`, no `..`.
 * A topic's dead-letter queue `{topic}.dlq` is valid for every valid topic, so it may be 204
 * characters long: the broker derives it and must always be able to create it.
 */
export function checkName(name: string, what: "topic" | "group" | "queue"): string {
  if (isName(name)) return name;
  if (what !== "group" && name.endsWith(DLQ_SUFFIX) && isName(name.slice(0, -DLQ_SUFFIX.length))) {
    return name;
  }
  const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
  throw new BrokerError(
    "invalid_name",
    `Invalid ${what} name "${shown}": use 1-200 characters of A-Z a-z 0-9 . _ -, ` +
      `not starting with "." and without ".."`,
  );
}
