/**
 * Ferry's TypeScript client: `new Ferry({ url, apiKey })` and its methods, one per broker
 * endpoint, plus a consumer loop (`messages`), WebSocket subscriptions (`subscribe`) and event
 * streams (`stream`). It uses only the platform (`fetch`, `WebSocket`, web streams), so the same
 * code runs in Deno, Node ≥ 20 and browsers.
 *
 * ```ts
 * import { Ferry } from "@ferry/client";
 * const ferry = new Ferry({ url: "http://127.0.0.1:7800" });
 * await ferry.publish("orders", { sku: "a1" });
 * for await (const msg of ferry.messages("orders", { signal })) handle(msg); // acked after each
 * ```
 *
 * @module
 */

export { DEFAULT_TIMEOUT_MS, DEFAULT_URL, Ferry } from "./ferry.ts";
export { FerryAdmin } from "./admin.ts";
export {
  CLIENT_ERROR_CODES,
  type ClientErrorCode,
  FerryBadResponseError,
  FerryClosedError,
  FerryConnectionError,
  FerryError,
  type FerryErrorInit,
  FerryTimeoutError,
  FerryUsageError,
  isTemporary,
} from "./errors.ts";
export type { RetryInfo } from "./http.ts";
export {
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  LEFT_EARLY_REASON,
  type MessageHandler,
  MessageLoop,
  type MessagesOptions,
} from "./messages.ts";
export type {
  BatchMessage,
  CallOptions,
  ConsumeOptions,
  Duration,
  FerryOptions,
  Filter,
  GroupOptions,
  Message,
  PublishBatchOptions,
  PublishOptions,
  RequeueOptions,
  TopicOptions,
} from "./options.ts";
export { payloadBytes, payloadJson, payloadText, type PublishBody } from "./payload.ts";
export { EventStream, type StreamOptions } from "./stream.ts";
export { type Handler, type SubscribeOptions, Subscription } from "./subscribe.ts";
export { ERROR_CODES, type ErrorCode } from "../../protocol/error_codes.ts";
export type {
  BatchAckAnswer,
  BatchPublishAnswer,
  BatchTouchAnswer,
  BroadcastAnswer,
  ClusterStatus,
  DeleteAnswer,
  DrainAnswer,
  GroupJson,
  HealthJson,
  MessageJson,
  Priority,
  Problem,
  PublishAnswer,
  PurgeAnswer,
  QueueItem,
  RedriveAnswer,
  RequeueAnswer,
  StatsJson,
  TopicJson,
  TouchAnswer,
  WebhookAttempt,
  WebhookDeleted,
  WebhookItem,
  WebhookJson,
  WebhookOutcome,
} from "../../protocol/wire.ts";
