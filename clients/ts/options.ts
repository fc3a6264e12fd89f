/**
 * The options the client's methods take, and the two conversions they share: durations (a
 * contract string like `"30s"`, or milliseconds) and filters.
 */

import { formatDuration, readDuration } from "../../protocol/duration.ts";
import type { MessageJson, Priority } from "../../protocol/wire.ts";
import type { RetryInfo } from "./http.ts";

/** A message as consume, peek, streams and WebSockets give it (docs/api/README.md). */
export type Message = MessageJson;

/** A duration: a contract string (`"250ms"`, `"30s"`, `"5m"`, `"1h"`) or milliseconds. */
export type Duration = string | number;

/** Matches JSON payloads whose top-level (or dotted) `key` exists, and equals `value` if given. */
export interface Filter {
  key: string;
  value?: string;
}

/** Settings of a client; all optional. */
export interface FerryOptions {
  /** The broker's base URL (default `http://127.0.0.1:7800`). */
  url?: string;
  /** The API key, sent as `X-API-Key` (and as `?api_key=` where a browser cannot set headers). */
  apiKey?: string;
  /**
   * The base URLs of the cluster's other nodes, to which a redirect may carry the API key (the
   * broker's own host, and the nodes its GET /api/cluster/status lists, need no naming).
   */
  clusterNodes?: readonly string[];
  /** Deadline of each request attempt, long polls included (default 60,000 ms). */
  timeoutMs?: number;
  /** Retries after the first attempt of a call that may be retried (default 3). */
  retries?: number;
  /** First wait between retries, doubling (default 200 ms); `Retry-After` wins when sent. */
  retryDelayMs?: number;
  /** Longest wait between retries (default 5,000 ms). */
  maxRetryDelayMs?: number;
  /**
   * `"auto"`: every publish without its own key gets `crypto.randomUUID()` as its
   * `Idempotency-Key`, so it may be retried after a lost connection without a duplicate. The
   * broker keeps each key for 5 minutes, which costs memory at high publish rates.
   */
  idempotencyKey?: "auto";
  /** Hears each retry before its wait (for logging). */
  onRetry?: (info: RetryInfo) => void;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
  /**
   * Fields added to every request's fetch options, for what the platform's fetch takes beyond
   * the standard: in Deno a `client` made with a private CA's certificate trusts that CA; in
   * Node, undici's `dispatcher`.
   */
  fetchOptions?: Record<string, unknown>;
  /**
   * The WebSocket class for `subscribe` (default `globalThis.WebSocket`; Node 20 has one only
   * with `--experimental-websocket`).
   */
  WebSocket?: typeof WebSocket;
}

/** Per-call settings every method takes. */
export interface CallOptions {
  /** Ends the call early; it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** This call's deadline per attempt (default: the client's `timeoutMs`). */
  timeoutMs?: number;
}

/** Options of `publish`. */
export interface PublishOptions extends CallOptions {
  /** Dropped if not consumed within this time. */
  ttl?: Duration;
  /** Hidden from consumers for this long. */
  delay?: Duration;
  priority?: Priority;
  /**
   * The `Idempotency-Key`: a repeat within 5 minutes is answered `deduplicated: true` and not
   * stored again. `"auto"` makes a fresh UUID for this publish. With a key a publish is retried
   * after a lost connection; without one it is not, since it may have been stored.
   */
  idempotencyKey?: string | "auto";
  /** Let the broker key on the SHA-256 of the payload (`?idempotency=auto`); also retried. */
  payloadKey?: boolean;
  /** Stored headers: names without an `X-MQ-` prefix get one (`trace` → `X-MQ-trace`). */
  headers?: Record<string, string>;
  /** Hand the message to the consumers waiting now and to live streams; never stored. */
  broadcast?: boolean;
  /** Content-Type to store (default: text for a string, JSON for an object, bytes otherwise). */
  contentType?: string;
}

/** One message of `publishBatch` with options of its own; the payload alone also does. */
export interface BatchMessage {
  /** Text (sent as `payload_text`) or bytes (sent Base64). */
  payload: string | Uint8Array;
  ttl?: Duration;
  delay?: Duration;
  priority?: Priority;
  /** As for `publish`; `"auto"` makes a fresh UUID for this message. */
  idempotencyKey?: string | "auto";
  /** Stored headers: names without an `X-MQ-` prefix get one. */
  headers?: Record<string, string>;
  /** Content-Type webhooks POST it with. */
  contentType?: string;
}

/** Options of `publishBatch`. */
export interface PublishBatchOptions extends CallOptions {
  /** Let the broker key each message without a key on the SHA-256 of its payload; retried. */
  payloadKey?: boolean;
}

/** Options of `consume`. */
export interface ConsumeOptions extends CallOptions {
  /** Messages to take at most, 1–1000 (default 1). */
  limit?: number;
  /** How long to wait for a message when there is none (long poll, at most 30 s; default 0). */
  timeout?: Duration;
  group?: string;
  /** Ack on delivery (at most once). */
  autoAck?: boolean;
  /** Look without taking. */
  peek?: boolean;
  filter?: Filter;
  /** This delivery's lease (default: the topic's visibility). */
  visibility?: Duration;
}

/** Options that only name a consumer group. */
export interface GroupOptions extends CallOptions {
  group?: string;
}

/** Options of `requeue`. */
export interface RequeueOptions extends CallOptions {
  /** Why; kept on the message and shown in the dead-letter queue. */
  reason?: string;
  /** Hidden this long before it is ready again. */
  delay?: Duration;
  /** The group it was consumed in (default: the message's `group`, else the default group). */
  group?: string;
  /** Move it to `{topic}.dlq` now, whatever its retry count (a message no retry can mend). */
  deadLetter?: boolean;
}

/** Options of `createTopic`. */
export interface TopicOptions extends CallOptions {
  /** What a full topic does: refuse publishes (`reject`, default) or drop its oldest. */
  policy?: "reject" | "drop-oldest";
  /** A TTL for every message; 0 or omitted sends no `retain` field: no default TTL. */
  retention?: Duration;
  /** The topic's lease length. */
  visibility?: Duration;
  maxMessages?: number;
  maxBytes?: number;
}

/** The contract string of a duration; throws a TypeError for a negative or non-finite number. */
export function durationText(d: Duration): string {
  if (typeof d === "string") return d;
  if (!Number.isFinite(d) || d < 0) {
    throw new TypeError(`Invalid duration ${d}: expected milliseconds >= 0 or a string like 30s`);
  }
  return formatDuration(Math.round(d));
}

/** Milliseconds of a duration; throws a TypeError for one that is not a contract duration. */
export function durationMs(d: Duration): number {
  if (typeof d === "number") {
    durationText(d); // checks it
    return Math.round(d);
  }
  const ms = readDuration(d);
  if (ms === undefined) {
    throw new TypeError(`Invalid duration "${d}": expected an integer and ms, s, m or h`);
  }
  return ms;
}

/** The `filter_key` / `filter_val` query values of a filter. */
export function filterQuery(f: Filter | undefined): Record<string, string | undefined> {
  return f ? { filter_key: f.key, filter_val: f.value } : {};
}
