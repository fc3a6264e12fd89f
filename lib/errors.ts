/**
 * @module The one error type lib throws, with a code from the closed list of
 * protocol/error_codes.ts (docs/api/README.md). Only routes/http.ts turns a code into an HTTP status.
 */

import type { ErrorCode } from "../protocol/error_codes.ts";

export type { ErrorCode };

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
