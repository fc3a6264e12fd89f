/**
 * The closed list of problem `code` values (docs/api/README.md). Dependency-free: the broker, the
 * client and the CLI share it.
 */

/** Every code a problem answer can carry. */
export const ERROR_CODES = [
  "bad_request",
  "invalid_name",
  "invalid_duration",
  "invalid_parameter",
  "empty_body",
  "unauthorized",
  "forbidden",
  "topic_limit_reached",
  "subscriptions_full",
  "not_found",
  "queue_empty",
  "message_not_found",
  "method_not_allowed",
  "already_exists",
  "payload_too_large",
  "queue_full",
  "memory_full",
  "rate_limited",
  "too_many_sockets",
  "draining",
  "electing",
  "unavailable",
  "storage_failed",
  "disk_full",
  "internal",
] as const;

/** One problem code. */
export type ErrorCode = typeof ERROR_CODES[number];
