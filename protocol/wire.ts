/**
 * The JSON the broker speaks (docs/api/: the answers, the Message object, health, cluster
 * and stats): what routes/wire.ts writes and what the client, the CLI and the
 * tests read. Types only; no Deno, no Node.
 */

import type { ErrorCode } from "./error_codes.ts";

/** Priorities in delivery order. */
export type Priority = "high" | "normal" | "low";

/** What a full topic does with a publish: refuse it, or drop its oldest message. */
export type Policy = "reject" | "drop-oldest";

/** The Message object: consume, peek, SSE, WebSocket and the dashboard all use it. */
export interface MessageJson {
  /** UUIDv7. */
  id: string;
  topic: string;
  /** The payload, Base64. */
  payload: string;
  /** The payload as text, when it is valid UTF-8. */
  payload_text?: string;
  /** ISO 8601, ms precision. */
  timestamp: string;
  retry_count: number;
  /** Stored `X-MQ-*` headers, names lower-cased. */
  headers: Record<string, string>;
  priority: Priority;
  expires_at?: string;
  /** The consuming group (or, in a DLQ, the group it came from). */
  group?: string;
  /** Why it was last requeued or dead-lettered. */
  reason?: string;
  redrive_count?: number;
}

/** POST /publish/{topic}: 201, or 200 with `deduplicated: true`. */
export interface PublishAnswer {
  id: string;
  topic: string;
  timestamp: string;
  priority: Priority;
  deduplicated: boolean;
  visible_at?: string;
  expires_at?: string;
}

/** POST /publish/{topic}/batch: one answer per message, in order. */
export interface BatchPublishAnswer {
  messages: PublishAnswer[];
}

/** One message of POST /publish/{topic}/batch: `payload` (Base64) or `payload_text`. */
export interface BatchPublishMessage {
  payload?: string;
  payload_text?: string;
  ttl?: string;
  delay?: string;
  priority?: Priority;
  idempotency_key?: string;
  /** `X-MQ-*` names. */
  headers?: Record<string, string>;
  content_type?: string;
}

/** Every field a batch message may have; the broker refuses others (a misspelt option). */
export const BATCH_MESSAGE_FIELDS: ReadonlySet<string> = new Set(
  [
    "payload",
    "payload_text",
    "ttl",
    "delay",
    "priority",
    "idempotency_key",
    "headers",
    "content_type",
  ] satisfies (keyof BatchPublishMessage)[],
);

/** POST /publish/{topic}?broadcast=true. */
export interface BroadcastAnswer {
  broadcast: true;
  delivered_to: number;
}

/** POST /ack/{topic} with `{"ids":[...]}`. */
export interface BatchAckAnswer {
  acked: number;
  not_found: string[];
}

/** POST /requeue. */
export interface RequeueAnswer {
  id: string;
  topic: string;
  retry_count: number;
  status: "requeued" | "dead_lettered";
  /** Where the message is now. */
  queue: string;
}

/** POST /touch/{topic}/{id}. */
export interface TouchAnswer {
  id: string;
  topic: string;
  visible_at: string;
}

/** POST /touch/{topic}: a batch touch. */
export interface BatchTouchAnswer {
  touched: number;
  not_found: string[];
  /** When the touched leases end. */
  visible_at: string;
  /** Their lease, from now, in milliseconds: `by`, or the topic's visibility. */
  lease_ms: number;
}

/** POST /api/topics. */
export interface TopicJson {
  name: string;
  policy: Policy;
  retain: string | null;
  visibility: string;
  max_messages: number;
  max_bytes: number | null;
  created_at: string;
}

/** POST /api/groups, and each item of GET /api/groups. */
export interface GroupJson {
  topic: string;
  group: string;
  created_at: string;
}

/** One item of GET /api/queues. */
export interface QueueItem {
  name: string;
  depth: number;
  in_flight: number;
  delayed: number;
  held: number;
  held_bytes: number;
  dlq_depth: number;
  groups: string[];
  policy: Policy;
  retain: string | null;
  oldest_age_seconds: number;
}

/** POST /api/queues/redrive. */
export interface RedriveAnswer {
  queue: string;
  source: string;
  moved: number;
}

/** One item of GET /api/queues/inflight: a message in flight and when its lease ends. */
export interface InFlightItem extends MessageJson {
  lease_ends_at: string;
}

/** POST /api/queues/release. */
export interface ReleaseAnswer {
  id: string;
  queue: string;
  group: string;
  retry_count: number;
  status: "released";
}

/** Events per second over one interval of GET /api/rates, which ended at `time`. */
export interface RatePointJson {
  time: string;
  published: number;
  delivered: number;
  acked: number;
  requeued: number;
  dead_lettered: number;
  expired: number;
}

/**
 * GET /api/rates: the broker's rates over the last minutes (`totals`, oldest first) and each
 * topic's latest ones; with `?queue=`, that queue's history in `points` instead of `topics`.
 */
export interface RatesJson {
  interval_seconds: number;
  totals: RatePointJson[];
  topics?: Record<string, RatePointJson>;
  queue?: string;
  points?: RatePointJson[];
}

/** DELETE /api/queues/purge. */
export interface PurgeAnswer {
  queue: string;
  purged: number;
}

/** DELETE /api/queues/delete. */
export interface DeleteAnswer {
  queue: string;
  deleted: true;
}

/** What came of one webhook POST. */
export type WebhookOutcome = "delivered" | "retried" | "dead_lettered" | "gone" | "broadcast";

/** POST /webhook/{topic}: the registration; the secret is never echoed. */
export interface WebhookJson {
  id: string;
  topic: string;
  url: string;
  /** True when it was registered with a secret. */
  signed: boolean;
  created_at: string;
}

/** One item of GET /api/webhooks (and GET /api/queues/webhooks). */
export interface WebhookItem extends WebhookJson {
  state: "active" | "paused";
  /** Messages its group still holds. */
  pending: number;
  last_attempt: {
    at: string;
    status: number | null;
    latency_ms: number;
    outcome: WebhookOutcome;
    error: string | null;
  } | null;
}

/** One item of GET /api/webhooks/{id}/attempts, newest first. */
export interface WebhookAttempt {
  at: string;
  message_id: string;
  retry_count: number;
  status: number | null;
  latency_ms: number;
  /** The first 1 KiB of the receiver's answer; null: none kept (no answer, or an internal target). */
  answer: string | null;
  error: string | null;
  outcome: WebhookOutcome;
}

/** DELETE /api/webhooks/{id}. */
export interface WebhookDeleted {
  id: string;
  deleted: true;
}

/** POST /api/drain. */
export interface DrainAnswer {
  status: "draining";
  /** Requests being served when the drain began, the drain itself not counted. */
  in_flight_requests: number;
}

/** One group's figures in GET /api/stats. */
export interface GroupStats {
  depth: number;
  in_flight: number;
  delayed: number;
  oldest_age_seconds: number;
}

/** GET /api/stats. */
export interface StatsJson {
  uptime_seconds: number;
  totals: {
    published: number;
    delivered: number;
    acked: number;
    requeued: number;
    dead_lettered: number;
    expired: number;
  };
  memory: { held_bytes: number; budget_bytes: number; drain_bytes_per_second: number };
  /** The disk alarm (docs/operating.md "Disk"); absent with `:memory:` or no limit. */
  disk?: DiskJson;
  topics: Record<string, GroupStats & { held_bytes: number; groups: Record<string, GroupStats> }>;
}

/** The data directory's free space against BROKER_DISK_FREE_LIMIT; `free_bytes` null: unknown. */
export interface DiskJson {
  free_bytes: number | null;
  limit_bytes: number;
  /** True while publishes are refused (507 disk_full). */
  alarm: boolean;
}

/** GET /healthz. */
export interface HealthJson {
  status: "ok" | "draining" | "error" | "electing";
  version?: string;
  uptime_seconds?: number;
  /** Present, true, while the disk alarm refuses publishes; the node still serves (status ok). */
  disk_alarm?: boolean;
  cluster_role?: "leader" | "follower" | "candidate";
  cluster_term?: number;
}

/** GET /api/cluster/status. */
export interface ClusterStatus {
  mode: "standalone" | "cluster";
  node_id: string;
  role: "leader" | "follower" | "candidate";
  term: number;
  leader: string | null;
  peers: ClusterPeer[];
}

/** A peer in GET /api/cluster/status (cluster mode). */
export interface ClusterPeer {
  id: string;
  address: string;
  role: "leader" | "follower" | "candidate";
  healthy: boolean;
  last_seen: string | null;
  /** Stream entries the peer has not confirmed yet (on the leader; null elsewhere). */
  lag_records: number | null;
  /** How long the peer has had entries it has not confirmed (on the leader; null elsewhere). */
  lag_seconds: number | null;
  /** On the leader: whether the peer is a synchronous follower (one that may lead next). */
  synchronous: boolean;
}

/** Every error answer (RFC 9457 problem details). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  request_id: string;
}

/** A client's frame on GET /ws (docs/api/websocket.md): JSON text with a `type`. */
export type WsClientFrame =
  /** Without `group` or `prefetch`, a spy on a pattern (`orders`, `orders.*`, `*`). */
  | { type: "subscribe"; topic: string; group?: string; prefetch?: number }
  | { type: "unsubscribe"; topic: string }
  /** Acks a delivery of a consuming subscription; its credit comes back. */
  | { type: "ack"; topic: string; id: string }
  /** Gives a delivery back (one more attempt); its credit comes back. */
  | { type: "requeue"; topic: string; id: string; reason?: string };

/** A server's frame on GET /ws. */
export type WsServerFrame =
  | { type: "subscribed"; topic: string }
  | { type: "unsubscribed"; topic: string }
  /** A message heard by the subscription on `subscription` (its pattern or topic). */
  | { type: "message"; subscription: string; message: MessageJson }
  /** A frame refused, or a subscription ended; the connection stays usable. */
  | { type: "error"; code: ErrorCode; detail: string };
