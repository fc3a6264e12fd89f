/**
 * JSON Schemas (2020-12, as OpenAPI 3.1 uses them) of every JSON shape in protocol/wire.ts: the
 * `components.schemas` of GET /openapi.json. Written once, here; tests/protocol/schemas_test.ts
 * derives a TypeScript type from each (protocol/schema_type.ts) and fails `deno check` when it is
 * not exactly the type of wire.ts, and the contract test validates real answers against them.
 * Dependency-free, like the rest of protocol/.
 */

import { ERROR_CODES } from "./error_codes.ts";

/** Where a named schema lives in the OpenAPI document. */
export const SCHEMA_BASE = "#/components/schemas/";

/** A `$ref` to a schema of SCHEMAS below (a literal type, so schema_type.ts can follow it). */
const ref = <const N extends string>(name: N) => ({ $ref: `${SCHEMA_BASE}${name}` }) as const;

/** A topic or group name as the broker checks it (lib/names.ts): 1–200 characters, `.dlq` on top. */
export const NAME_PATTERN = "^(?!.*\\.\\.)[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$";
/** A duration (protocol/duration.ts): an integer and a unit. */
export const DURATION_PATTERN = "^[0-9]{1,12}(ms|s|m|h)$";

const time = { type: "string", format: "date-time" } as const;
const count = { type: "integer", minimum: 0 } as const;
const rate = { type: "number", minimum: 0, description: "Events per second." } as const;
const uuid = { type: "string", format: "uuid" } as const;
const role = { type: "string", enum: ["leader", "follower", "candidate"] } as const;
const policy = {
  type: "string",
  enum: ["reject", "drop-oldest"],
  description: "What a publish to a full topic does: refuse (429) or drop the oldest message.",
} as const;
const groupFigures = {
  depth: { ...count, description: "Messages ready to deliver." },
  in_flight: { ...count, description: "Messages delivered and not yet acked." },
  delayed: { ...count, description: "Messages waiting for their delay to pass." },
  oldest_age_seconds: {
    type: "number",
    minimum: 0,
    description: "Age of the oldest message not yet acked.",
  },
} as const;
const messageFields = {
  id: { ...uuid, description: "A UUIDv7: ids sort by publish time." },
  topic: { type: "string" },
  payload: {
    type: "string",
    contentEncoding: "base64",
    description: "The published bytes, Base64.",
  },
  payload_text: {
    type: "string",
    description: "The payload as text; present only when the bytes are valid UTF-8.",
  },
  timestamp: { ...time, description: "When it was published (UTC, ms precision)." },
  retry_count: { ...count, description: "Re-queues and expired leases so far." },
  headers: {
    type: "object",
    additionalProperties: { type: "string" },
    description: "The `X-MQ-*` headers given at publish time, names lower-cased.",
  },
  priority: ref("Priority"),
  expires_at: { ...time, description: "When its TTL ends; absent without a TTL." },
  group: {
    type: "string",
    description: "The consuming group; in a DLQ, the group it failed in.",
  },
  reason: { type: "string", description: "Why it was last requeued or dead-lettered." },
  redrive_count: { type: "integer", minimum: 1, description: "Redrives out of the DLQ." },
} as const;
const messageRequired = [
  "id",
  "topic",
  "payload",
  "timestamp",
  "retry_count",
  "headers",
  "priority",
] as const;
const webhookFields = {
  id: { ...uuid, description: "The webhook's id (a UUIDv7)." },
  topic: { type: "string" },
  url: { type: "string", format: "uri" },
  signed: { type: "boolean", description: "True when registered with a secret." },
  created_at: time,
} as const;
const webhookOutcome = {
  type: "string",
  enum: ["delivered", "retried", "dead_lettered", "gone", "broadcast"],
} as const;

/** Every named schema, by component name. */
export const SCHEMAS = {
  Priority: {
    type: "string",
    enum: ["high", "normal", "low"],
    description: "Delivery order: high before normal before low; FIFO within one priority.",
  },
  ErrorCode: {
    type: "string",
    enum: ERROR_CODES,
    description: "The stable `code` of a problem answer.",
  },
  Message: {
    type: "object",
    description: "The Message object: consume, peek, SSE, WebSocket and the dashboard use it.",
    properties: messageFields,
    required: messageRequired,
  },
  PublishAnswer: {
    type: "object",
    properties: {
      id: uuid,
      topic: { type: "string" },
      timestamp: time,
      priority: ref("Priority"),
      deduplicated: {
        type: "boolean",
        description: "True when an idempotency key repeated: `id` is the original message's.",
      },
      visible_at: { ...time, description: "When a delayed message becomes available." },
      expires_at: { ...time, description: "When its TTL ends." },
    },
    required: ["id", "topic", "timestamp", "priority", "deduplicated"],
  },
  BatchPublishAnswer: {
    type: "object",
    properties: {
      messages: {
        type: "array",
        items: ref("PublishAnswer"),
        description: "One answer per message of the request, in its order.",
      },
    },
    required: ["messages"],
  },
  BroadcastAnswer: {
    type: "object",
    properties: {
      broadcast: { const: true },
      delivered_to: { ...count, description: "Consumers waiting at that instant that got it." },
    },
    required: ["broadcast", "delivered_to"],
  },
  BatchAckAnswer: {
    type: "object",
    properties: {
      acked: count,
      not_found: { type: "array", items: { type: "string" } },
    },
    required: ["acked", "not_found"],
  },
  BatchTouchAnswer: {
    type: "object",
    properties: {
      touched: count,
      not_found: { type: "array", items: { type: "string" } },
      visible_at: { ...time, description: "When the touched leases end." },
      lease_ms: { ...count, description: "Their lease from now: `by`, or the topic's visibility." },
    },
    required: ["touched", "not_found", "visible_at", "lease_ms"],
  },
  RequeueAnswer: {
    type: "object",
    properties: {
      id: { type: "string" },
      topic: { type: "string" },
      retry_count: count,
      status: { type: "string", enum: ["requeued", "dead_lettered"] },
      queue: { type: "string", description: "Where the message is now (`{topic}.dlq` if moved)." },
    },
    required: ["id", "topic", "retry_count", "status", "queue"],
  },
  TouchAnswer: {
    type: "object",
    properties: {
      id: { type: "string" },
      topic: { type: "string" },
      visible_at: { ...time, description: "When the extended lease ends." },
    },
    required: ["id", "topic", "visible_at"],
  },
  Topic: {
    type: "object",
    properties: {
      name: { type: "string" },
      policy,
      retain: {
        type: ["string", "null"],
        description: "TTL applied to every message published (a duration), or null.",
      },
      visibility: { type: "string", description: "Lease of a delivered message (a duration)." },
      max_messages: { ...count, description: "Messages held at most before `policy` applies." },
      max_bytes: { type: ["integer", "null"], minimum: 1 },
      created_at: time,
    },
    required: [
      "name",
      "policy",
      "retain",
      "visibility",
      "max_messages",
      "max_bytes",
      "created_at",
    ],
  },
  Group: {
    type: "object",
    properties: { topic: { type: "string" }, group: { type: "string" }, created_at: time },
    required: ["topic", "group", "created_at"],
  },
  QueueItem: {
    type: "object",
    properties: {
      name: { type: "string" },
      depth: groupFigures.depth,
      in_flight: groupFigures.in_flight,
      delayed: groupFigures.delayed,
      held: { ...count, description: "Messages held in memory (every state)." },
      held_bytes: count,
      dlq_depth: count,
      groups: { type: "array", items: { type: "string" } },
      policy,
      retain: { type: ["string", "null"] },
      oldest_age_seconds: groupFigures.oldest_age_seconds,
    },
    required: [
      "name",
      "depth",
      "in_flight",
      "delayed",
      "held",
      "held_bytes",
      "dlq_depth",
      "groups",
      "policy",
      "retain",
      "oldest_age_seconds",
    ],
  },
  RedriveAnswer: {
    type: "object",
    properties: {
      queue: { type: "string" },
      source: { type: "string", description: "The DLQ the messages came from." },
      moved: count,
    },
    required: ["queue", "source", "moved"],
  },
  InFlightItem: {
    type: "object",
    description: "A Message in flight, with the end of its lease.",
    properties: { ...messageFields, lease_ends_at: time },
    required: [...messageRequired, "lease_ends_at"],
  },
  ReleaseAnswer: {
    type: "object",
    properties: {
      id: { type: "string" },
      queue: { type: "string" },
      group: { type: "string" },
      retry_count: count,
      status: { const: "released" },
    },
    required: ["id", "queue", "group", "retry_count", "status"],
  },
  RatePoint: {
    type: "object",
    properties: {
      time: { ...time, description: "The end of the interval." },
      published: rate,
      delivered: rate,
      acked: rate,
      requeued: rate,
      dead_lettered: rate,
      expired: rate,
    },
    required: ["time", "published", "delivered", "acked", "requeued", "dead_lettered", "expired"],
  },
  Rates: {
    type: "object",
    properties: {
      interval_seconds: { type: "number" },
      totals: { type: "array", items: ref("RatePoint"), description: "Oldest first." },
      topics: { type: "object", additionalProperties: ref("RatePoint") },
      queue: { type: "string" },
      points: { type: "array", items: ref("RatePoint") },
    },
    required: ["interval_seconds", "totals"],
  },
  PurgeAnswer: {
    type: "object",
    properties: { queue: { type: "string" }, purged: count },
    required: ["queue", "purged"],
  },
  DeleteAnswer: {
    type: "object",
    properties: { queue: { type: "string" }, deleted: { const: true } },
    required: ["queue", "deleted"],
  },
  GroupStats: {
    type: "object",
    properties: groupFigures,
    required: ["depth", "in_flight", "delayed", "oldest_age_seconds"],
  },
  Stats: {
    type: "object",
    properties: {
      uptime_seconds: count,
      totals: {
        type: "object",
        properties: {
          published: count,
          delivered: count,
          acked: count,
          requeued: count,
          dead_lettered: count,
          expired: count,
        },
        required: ["published", "delivered", "acked", "requeued", "dead_lettered", "expired"],
      },
      memory: {
        type: "object",
        properties: {
          held_bytes: count,
          budget_bytes: count,
          drain_bytes_per_second: count,
        },
        required: ["held_bytes", "budget_bytes", "drain_bytes_per_second"],
      },
      disk: {
        type: "object",
        description: "The disk alarm; absent with `:memory:` or BROKER_DISK_FREE_LIMIT=0.",
        properties: {
          free_bytes: { type: ["integer", "null"], minimum: 0 },
          limit_bytes: count,
          alarm: { type: "boolean", description: "True while publishes get 507 disk_full." },
        },
        required: ["free_bytes", "limit_bytes", "alarm"],
      },
      topics: {
        type: "object",
        additionalProperties: {
          type: "object",
          properties: {
            ...groupFigures,
            held_bytes: count,
            groups: { type: "object", additionalProperties: ref("GroupStats") },
          },
          required: ["depth", "in_flight", "delayed", "oldest_age_seconds", "held_bytes", "groups"],
        },
      },
    },
    required: ["uptime_seconds", "totals", "memory", "topics"],
  },
  Health: {
    type: "object",
    properties: {
      status: { type: "string", enum: ["ok", "draining", "error", "electing"] },
      version: { type: "string", description: "Present when `status` is ok." },
      uptime_seconds: { ...count, description: "Present when `status` is ok." },
      cluster_role: { ...role, description: "Cluster mode only." },
      cluster_term: { ...count, description: "Cluster mode only." },
      disk_alarm: {
        type: "boolean",
        description:
          "Present (true) while the disk alarm refuses publishes (507); status stays ok.",
      },
    },
    required: ["status"],
  },
  ClusterPeer: {
    type: "object",
    properties: {
      id: { type: "string" },
      address: { type: "string" },
      role,
      healthy: { type: "boolean" },
      last_seen: { type: ["string", "null"], format: "date-time" },
      lag_records: {
        type: ["integer", "null"],
        minimum: 0,
        description: "Stream entries the peer has not confirmed (on the leader; null elsewhere).",
      },
      lag_seconds: {
        type: ["number", "null"],
        minimum: 0,
        description:
          "How long the peer has had unconfirmed entries (on the leader; null elsewhere).",
      },
      synchronous: {
        type: "boolean",
        description: "On the leader: whether the peer is a synchronous follower (may lead next).",
      },
    },
    required: [
      "id",
      "address",
      "role",
      "healthy",
      "last_seen",
      "lag_records",
      "lag_seconds",
      "synchronous",
    ],
  },
  ClusterStatus: {
    type: "object",
    properties: {
      mode: { type: "string", enum: ["standalone", "cluster"] },
      node_id: { type: "string" },
      role,
      term: count,
      leader: { type: ["string", "null"], description: "The leader's address." },
      peers: { type: "array", items: ref("ClusterPeer") },
    },
    required: ["mode", "node_id", "role", "term", "leader", "peers"],
  },
  Problem: {
    type: "object",
    description: "RFC 9457 problem details, `application/problem+json`.",
    properties: {
      type: { type: "string", description: "Always `about:blank`." },
      title: { type: "string", description: "The status's reason phrase." },
      status: { type: "integer", minimum: 400, maximum: 599 },
      detail: { type: "string", description: "What failed, with the value." },
      code: ref("ErrorCode"),
      request_id: { type: "string", description: "Also in the `X-Request-Id` header and logs." },
    },
    required: ["type", "title", "status", "detail", "code", "request_id"],
  },
  Webhook: {
    type: "object",
    description: "A registration; the secret is never echoed.",
    properties: webhookFields,
    required: ["id", "topic", "url", "signed", "created_at"],
  },
  WebhookItem: {
    type: "object",
    properties: {
      ...webhookFields,
      state: { type: "string", enum: ["active", "paused"] },
      pending: { ...count, description: "Messages its group still holds." },
      last_attempt: {
        oneOf: [
          {
            type: "object",
            properties: {
              at: time,
              status: { type: ["integer", "null"] },
              latency_ms: { type: "number", minimum: 0 },
              outcome: webhookOutcome,
              error: { type: ["string", "null"] },
            },
            required: ["at", "status", "latency_ms", "outcome", "error"],
          },
          { type: "null" },
        ],
      },
    },
    required: [
      "id",
      "topic",
      "url",
      "signed",
      "created_at",
      "state",
      "pending",
      "last_attempt",
    ],
  },
  WebhookAttempt: {
    type: "object",
    properties: {
      at: time,
      message_id: { type: "string" },
      retry_count: count,
      status: { type: ["integer", "null"], description: "The receiver's status; null if none." },
      latency_ms: { type: "number", minimum: 0 },
      answer: {
        type: ["string", "null"],
        description: "The first 1 KiB of the receiver's answer; null if none is kept (no " +
          "answer, or a loopback or private target).",
      },
      error: { type: ["string", "null"] },
      outcome: webhookOutcome,
    },
    required: [
      "at",
      "message_id",
      "retry_count",
      "status",
      "latency_ms",
      "answer",
      "error",
      "outcome",
    ],
  },
  WebhookDeleted: {
    type: "object",
    properties: { id: { type: "string" }, deleted: { const: true } },
    required: ["id", "deleted"],
  },
  DrainAnswer: {
    type: "object",
    properties: {
      status: { const: "draining" },
      in_flight_requests: {
        ...count,
        description: "Requests being served when the drain began, the drain not counted.",
      },
    },
    required: ["status", "in_flight_requests"],
  },
  WsClientFrame: {
    description: "A client's JSON text frame on GET /ws.",
    oneOf: [
      {
        type: "object",
        description: "Without `group` or `prefetch`: a spy on a topic, `prefix*` or `*`. " +
          "With either: consumes one topic as that group.",
        properties: {
          type: { const: "subscribe" },
          topic: { type: "string", minLength: 1 },
          group: { type: "string" },
          prefetch: { type: "integer", minimum: 1, maximum: 1000, default: 10 },
        },
        required: ["type", "topic"],
      },
      {
        type: "object",
        properties: { type: { const: "unsubscribe" }, topic: { type: "string", minLength: 1 } },
        required: ["type", "topic"],
      },
      {
        type: "object",
        description: "Acks a delivery of a consuming subscription.",
        properties: {
          type: { const: "ack" },
          topic: { type: "string", minLength: 1 },
          id: { type: "string", minLength: 1 },
        },
        required: ["type", "topic", "id"],
      },
      {
        type: "object",
        description: "Gives a delivery back (one more attempt).",
        properties: {
          type: { const: "requeue" },
          topic: { type: "string", minLength: 1 },
          id: { type: "string", minLength: 1 },
          reason: { type: "string", maxLength: 1024 },
        },
        required: ["type", "topic", "id"],
      },
    ],
  },
  WsServerFrame: {
    description: "The server's JSON text frames on GET /ws.",
    oneOf: [
      {
        type: "object",
        properties: { type: { const: "subscribed" }, topic: { type: "string" } },
        required: ["type", "topic"],
      },
      {
        type: "object",
        properties: { type: { const: "unsubscribed" }, topic: { type: "string" } },
        required: ["type", "topic"],
      },
      {
        type: "object",
        properties: {
          type: { const: "message" },
          subscription: { type: "string", description: "The pattern or topic it was heard on." },
          message: ref("Message"),
        },
        required: ["type", "subscription", "message"],
      },
      {
        type: "object",
        description: "A frame refused, or a subscription ended; the connection stays usable.",
        properties: {
          type: { const: "error" },
          code: ref("ErrorCode"),
          detail: { type: "string" },
        },
        required: ["type", "code", "detail"],
      },
    ],
  },
} as const;

/** The name of one schema. */
export type SchemaName = keyof typeof SCHEMAS;

/** A `$ref` to a named schema. */
export function schemaRef(name: SchemaName): { $ref: string } {
  return { $ref: `${SCHEMA_BASE}${name}` };
}
