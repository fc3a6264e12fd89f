/**
 * @module The one error type lib throws, and the closed list of codes from CONTRACT.md.
 * Only routes/http.ts turns a code into an HTTP status.
 */

/** Every refusal the broker can express; each maps to one HTTP status in routes/http.ts. */
export type ErrorCode =
  | "bad_request"
  | "invalid_name"
  | "invalid_duration"
  | "invalid_parameter"
  | "empty_body"
  | "unauthorized"
  | "forbidden"
  | "topic_limit_reached"
  | "not_found"
  | "queue_empty"
  | "message_not_found"
  | "method_not_allowed"
  | "already_exists"
  | "payload_too_large"
  | "queue_full"
  | "memory_full"
  | "draining"
  | "electing"
  | "unavailable"
  | "internal";

/**
 * A refusal with a stable code and a message that names the action and the value; a 429 or 503
 * may say how many seconds to wait before a retry.
 */
export class BrokerError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "BrokerError";
  }
}
