/** @module Topic and group names, checked before they reach the WAL's file names. */

import { BrokerError } from "./errors.ts";

const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;

/** Throws `invalid_name` unless `name` is 1–200 of `A-Z a-z 0-9 . _ -`, no leading `.`, no `..`. */
export function checkName(name: string, what: "topic" | "group" | "queue"): string {
  if (!NAME.test(name) || name.includes("..")) {
    const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
    throw new BrokerError(
      "invalid_name",
      `Invalid ${what} name "${shown}": use 1-200 characters of A-Z a-z 0-9 . _ -, ` +
        `not starting with "." and without ".."`,
    );
  }
  return name;
}
