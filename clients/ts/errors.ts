/**
 * The client's errors: one `FerryError` for everything the broker refuses (its RFC 9457 problem
 * body read apart), and two kinds of it for what never got an answer: a request that ran past
 * its time (`FerryTimeoutError`) and one that could not reach the broker or lost the connection
 * (`FerryConnectionError`). Catching `FerryError` catches all three. A call that cannot be made
 * as given throws a `FerryUsageError`, a TypeError, before anything is sent.
 */

import type { ErrorCode } from "../../protocol/error_codes.ts";
import type { Problem } from "../../protocol/wire.ts";

/**
 * Codes of errors that carry no problem body: `timeout` and `connection_failed` for the two
 * kinds below, `bad_response` for an answer that is not Ferry's (a proxy's HTML page, say),
 * `redirect_refused` for a redirect the API key may not follow, `closed` for a call after
 * `ferry.close()`.
 */
export type ClientErrorCode =
  | "timeout"
  | "connection_failed"
  | "bad_response"
  | "redirect_refused"
  | "closed";

/** Every code a FerryError can carry: the broker's (ERROR_CODES), then the client's own. */
export const CLIENT_ERROR_CODES: readonly ClientErrorCode[] = [
  "timeout",
  "connection_failed",
  "bad_response",
  "redirect_refused",
  "closed",
];

/** What a FerryError is made of. */
export interface FerryErrorInit {
  /** The HTTP status; 0 when no answer came. */
  status: number;
  code: ErrorCode | ClientErrorCode;
  detail: string;
  /** The broker's request id (`X-Request-Id`), also for requests that got no answer. */
  requestId?: string;
  /** Seconds the broker asked to wait (`Retry-After` of a 429 or 503). */
  retryAfter?: number;
  /** What was being done, e.g. `POST /publish/orders`. */
  action?: string;
  cause?: unknown;
}

/** A request the broker refused (a problem answer), or, as a subclass, one that got no answer. */
export class FerryError extends Error {
  /** The HTTP status; 0 when no answer came (timeout, connection failure). */
  readonly status: number;
  /** The problem's stable snake_case `code` (docs/api/README.md), or a ClientErrorCode. */
  readonly code: ErrorCode | ClientErrorCode;
  /** The problem's `detail`: what failed, with the value. */
  readonly detail: string;
  /** The request id to look for in the broker's log. */
  readonly requestId: string | undefined;
  /** Seconds the broker asked to wait before a retry, when it said (see `retryAfterMs`). */
  readonly retryAfter: number | undefined;
  /** Milliseconds the broker asked to wait before a retry (`Retry-After`), when it said. */
  readonly retryAfterMs: number | undefined;

  constructor(init: FerryErrorInit) {
    const where = init.action ? `${init.action}: ` : "";
    const status = init.status ? `${init.status} ` : "";
    super(`${where}${status}${init.code}: ${init.detail}`, { cause: init.cause });
    this.name = "FerryError";
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
    this.retryAfterMs = init.retryAfter === undefined ? undefined : init.retryAfter * 1000;
  }
}

/** A request that got no complete answer within its `timeoutMs`; `status` is 0. */
export class FerryTimeoutError extends FerryError {
  constructor(init: Omit<FerryErrorInit, "status" | "code">) {
    super({ ...init, status: 0, code: "timeout" });
    this.name = "FerryTimeoutError";
  }
}

/** The broker could not be reached, or the connection broke before the answer; `status` is 0. */
export class FerryConnectionError extends FerryError {
  constructor(init: Omit<FerryErrorInit, "status" | "code">) {
    super({ ...init, status: 0, code: "connection_failed" });
    this.name = "FerryConnectionError";
  }
}

/**
 * An answer the client cannot read: a 2xx whose body is not the JSON it expects, an error page
 * that is not a Ferry problem body (a proxy's, say), an unreadable WebSocket frame. `code` is
 * `bad_response`; `status` is the HTTP status (0 for a frame); `cause` holds the parse error.
 */
export class FerryBadResponseError extends FerryError {
  constructor(init: Omit<FerryErrorInit, "code">) {
    super({ ...init, code: "bad_response" });
    this.name = "FerryBadResponseError";
  }
}

/** A call made after `ferry.close()`; `code` is `closed`, `status` 0. */
export class FerryClosedError extends FerryError {
  constructor(action: string) {
    super({ status: 0, code: "closed", detail: "The client is closed (ferry.close())", action });
    this.name = "FerryClosedError";
  }
}

/**
 * A call the client cannot make as given: an `apiKey` or header value that no HTTP header can
 * carry. Thrown before anything is sent (by `new Ferry()` for the key), so never retried. A
 * TypeError, as for any bad argument, not a FerryError: no request was made.
 */
export class FerryUsageError extends TypeError {
  /** The option at fault, as the message names it: `apiKey`, `header "X-MQ-trace"`. */
  readonly option: string;
  /** What is wrong with its value, without the value (an API key is a secret). */
  readonly reason: string;

  constructor(option: string, reason: string) {
    super(`Invalid ${option}: ${reason}`);
    this.name = "FerryUsageError";
    this.option = option;
    this.reason = reason;
  }
}

/** Spaces, tabs and line breaks around a value, which the platform strips before sending it. */
const EDGE_SPACE = /^[\t\n\r ]*/;
/** A character a header value cannot hold: what is not a tab, visible ASCII, space or Latin-1. */
const NOT_IN_HEADER = /[^\t\x20-\x7e\x80-\xff]/u;
/** A character a header name cannot hold (RFC 9110 `token`). */
const NOT_IN_NAME = /[^!#$%&'*+.^_`|~0-9A-Za-z-]/u;

/**
 * Throws a FerryUsageError naming `option` unless `value` can be sent as a header value: text in
 * ISO-8859-1 without line breaks or other control characters (RFC 9110 `field-value`; spaces and
 * line breaks around it are stripped, as `fetch` does).
 */
export function checkHeaderValue(option: string, value: string): void {
  const start = EDGE_SPACE.exec(value)![0].length;
  const inner = value.slice(start).replace(/[\t\n\r ]+$/, "");
  const m = NOT_IN_HEADER.exec(inner);
  if (!m) return;
  const code = m[0].codePointAt(0)!;
  const u = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  const what = code === 0x0a || code === 0x0d
    ? `a line break (${u})`
    : code < 0x80
    ? `a control character (${u})`
    : `"${m[0]}" (${u})`;
  throw new FerryUsageError(
    option,
    `${what} at character ${start + m.index + 1}; a header carries only ISO-8859-1 text ` +
      `without line breaks or control characters`,
  );
}

/** Throws a FerryUsageError unless `name` can be a header's name. */
export function checkHeaderName(name: string): void {
  const m = NOT_IN_NAME.exec(name);
  if (!name || m) {
    throw new FerryUsageError(
      `header name ${JSON.stringify(name)}`,
      "use letters, digits and ! # $ % & ' * + - . ^ _ ` | ~ only",
    );
  }
}

/** True for the refusals that say "not now": 429 (backpressure) and 503 (draining, electing). */
export function isBusy(e: unknown): e is FerryError {
  return e instanceof FerryError && (e.status === 429 || e.status === 503);
}

/**
 * True for what may pass if tried again later: no answer (timeout, lost connection) or a busy
 * refusal. A 4xx such as a bad name or a missing key will not pass by waiting.
 */
export function isTransient(e: unknown): e is FerryError {
  return e instanceof FerryTimeoutError || e instanceof FerryConnectionError || isBusy(e);
}

/**
 * True when the same call may succeed later as it is: no answer (a timeout, a lost connection)
 * or a status of 408, 429, 502, 503 (but not `storage_failed`, a disk fault) or 504. A 4xx such
 * as a bad name or a missing key, or a call after `close()`, will not pass by waiting.
 */
export function isTemporary(e: unknown): e is FerryError {
  if (e instanceof FerryTimeoutError || e instanceof FerryConnectionError) return true;
  if (!(e instanceof FerryError) || e.code === "storage_failed") return false;
  return [408, 429, 502, 503, 504].includes(e.status);
}

/**
 * The FerryError of a non-2xx answer: the problem body's fields when it is one, else a
 * `bad_response` naming the status and the start of the body.
 */
export function problemError(
  status: number,
  headers: Headers,
  text: string,
  action: string,
  sentRequestId: string | undefined,
): FerryError {
  const requestId = headers.get("x-request-id") ?? sentRequestId;
  const retryAfter = retryAfterSeconds(headers.get("retry-after"));
  let problem: Partial<Problem> | undefined;
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && typeof v.code === "string") problem = v;
  } catch { /* not JSON */ }
  if (!problem) {
    const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text;
    return new FerryBadResponseError({
      status,
      detail: `The answer is not a Ferry problem body: ${JSON.stringify(shown)}`,
      requestId,
      retryAfter,
      action,
    });
  }
  return new FerryError({
    status,
    code: problem.code!,
    detail: typeof problem.detail === "string" ? problem.detail : "",
    requestId: typeof problem.request_id === "string" ? problem.request_id : requestId,
    retryAfter,
    action,
  });
}

/** Seconds of a `Retry-After` header (a number of seconds or an HTTP date), if readable. */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
