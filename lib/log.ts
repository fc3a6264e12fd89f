/**
 * @module Structured logs: one JSON object per line on stderr (time, level, msg, fields).
 * Secrets never reach here: callers pass topic names and ids, never keys or payloads.
 */

import type { LogLevel } from "./config.ts";

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const encoder = new TextEncoder();

/** Fields attached to a log line (request_id, topic, duration_ms, ...). */
export type LogFields = Record<string, unknown>;

/** A leveled JSON-lines logger; `write` is injectable so tests can capture lines. */
export class Logger {
  readonly #min: number;
  constructor(
    level: LogLevel = "info",
    readonly write: (line: string) => void = (line) => Deno.stderr.writeSync(encoder.encode(line)),
  ) {
    this.#min = RANK[level];
  }

  log(level: LogLevel, msg: string, fields?: LogFields): void {
    if (RANK[level] < this.#min) return;
    this.#write(level, msg, fields);
  }

  /** An `audit` line (an admin action, a key reload): written whatever the level. */
  audit(fields: LogFields): void {
    this.#write("info", "audit", fields);
  }

  #write(level: LogLevel, msg: string, fields?: LogFields): void {
    const rec: LogFields = { time: new Date().toISOString(), level, msg, ...fields };
    if (rec.error instanceof Error) {
      rec.error = `${rec.error.name}: ${rec.error.message}`;
    }
    this.write(JSON.stringify(rec) + "\n");
  }

  debug(msg: string, fields?: LogFields): void {
    this.log("debug", msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.log("info", msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.log("warn", msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.log("error", msg, fields);
  }
}

/** A logger that drops everything, for tests and embedders that want silence. */
export const silentLogger = new Logger("error", () => {});
