/**
 * The client's errors: one `FerryError` for everything the broker refuses (its RFC 9457 problem
 * body read apart), and two kinds of it for what never got an answer: a request that ran past
 * its time (`FerryTimeoutError`) and one that could not reach the broker or lost the connection
 * (`FerryConnectionError`). Catching `FerryError` catches all three.
 */

import type { ErrorCode } from "../protocol/error_codes.ts";
import type { Problem } from "../protocol/wire.ts";

/**
 * Codes of errors that carry no problem body: `timeout` and `connection_failed` for the two
 * kinds below, `bad_response` for an answer that is not Ferry's (a proxy's HTML page, say).
 */
export type ClientErrorCode = "timeout" | "connection_failed" | "bad_response";

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
  /** The problem's stable snake_case `code` (CONTRACT "Errors"), or a ClientErrorCode. */
  readonly code: ErrorCode | ClientErrorCode;
  /** The problem's `detail`: what failed, with the value. */
  readonly detail: string;
  /** The request id to look for in the broker's log. */
  readonly requestId: string | undefined;
  /** Seconds the broker asked to wait before a retry, when it said. */
  readonly retryAfter: number | undefined;

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
    return new FerryError({
      status,
      code: "bad_response",
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
