/** Consume, ack (one or a batch), requeue and touch. */

import {
  MAX_CONSUME_LIMIT,
  MAX_LONG_POLL_MS,
  MAX_TIME_MS,
  MAX_VISIBILITY_MS,
} from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import { readJson } from "./body.ts";
import { durationIn, json, jsonText, optString } from "./http.ts";
import type { Ctx, Route } from "./router.ts";
import { isoTime, messagesText, messageText, requeuedJson } from "./wire.ts";
import type { BatchAckAnswer, BatchTouchAnswer, TouchAnswer } from "../protocol/wire.ts";
import { schemaRef, SCHEMAS } from "../protocol/schemas.ts";
import {
  boolQuery,
  durationQuery,
  durationSchema,
  GROUP_NAME,
  GROUP_QUERY,
  intQuery,
  query,
  type RouteDoc,
  TOPIC_NAME,
} from "./route_doc.ts";

const MAX_BATCH_ACK = 10_000;

function group(ctx: Ctx, body?: Record<string, unknown>): string {
  const g = ctx.query.str("group") ?? (body ? optString(body, "group") : undefined) ?? "";
  return g ? checkName(g, "group") : "";
}

async function consume(req: Request, ctx: Ctx): Promise<Response> {
  const { query } = ctx;
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const limit = query.int("limit", 1, 1, MAX_CONSUME_LIMIT);
  const filterKey = query.str("filter_key") || undefined;
  const filterVal = query.str("filter_val");
  if (filterVal !== undefined && filterVal !== "" && !filterKey) {
    throw new BrokerError("invalid_parameter", "filter_val needs filter_key");
  }
  // The body is built before anything is acked: a message the answer cannot carry stays held.
  const body = await ctx.broker.consume(topic, {
    group: group(ctx),
    limit,
    timeoutMs: query.duration("timeout", MAX_LONG_POLL_MS),
    autoAck: query.bool("auto_ack"),
    peek: query.bool("peek"),
    filterKey,
    filterVal: filterKey && filterVal !== undefined && filterVal !== "" ? filterVal : undefined,
    visibilityMs: query.duration("visibility", MAX_VISIBILITY_MS, 1),
    // Read only if the poll parks: `req.signal` costs an AbortSignal and a cancel watch.
    get signal() {
      return req.signal;
    },
  }, (messages) => {
    if (!messages.length) {
      throw new BrokerError("queue_empty", `No message available in "${topic}"`);
    }
    return limit === 1 ? messageText(messages[0]!) : messagesText(messages);
  });
  return jsonText(body);
}

async function ackOne(_req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const id = ctx.params.id ?? "";
  const g = group(ctx);
  const { notFound } = await ctx.broker.ack(topic, g, [id]);
  if (notFound.length) {
    const where = g ? `"${topic}" group "${g}"` : `"${topic}"`;
    throw new BrokerError("message_not_found", `Cannot ack message "${id}" in ${where}: not found`);
  }
  return new Response(null, { status: 204 });
}

/** The schema of a batch ack's or touch's `ids`. */
const BATCH_IDS = {
  type: "array",
  items: { type: "string" },
  minItems: 1,
  maxItems: MAX_BATCH_ACK,
};

/** The `ids` of a batch ack or touch body: 1 to MAX_BATCH_ACK message ids, else 400. */
function batchIds(body: Record<string, unknown>, what: "ack" | "touch"): string[] {
  const ids = body.ids;
  if (!Array.isArray(ids) || ids.length === 0 || ids.some((id) => typeof id !== "string")) {
    throw new BrokerError("invalid_parameter", 'Expected "ids": a non-empty array of message ids');
  }
  if (ids.length > MAX_BATCH_ACK) {
    throw new BrokerError(
      "invalid_parameter",
      `Too many ids: ${ids.length}; a batch ${what} takes at most ${MAX_BATCH_ACK}`,
    );
  }
  return ids as string[];
}

async function ackBatch(req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const body = await readJson(req, ctx.accepts);
  const ids = batchIds(body, "ack");
  const { acked, notFound } = await ctx.broker.ack(topic, group(ctx, body), ids);
  return json({ acked: acked.length, not_found: notFound } satisfies BatchAckAnswer);
}

async function requeue(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req, ctx.accepts);
  const id = optString(body, "id");
  const topic = optString(body, "topic") ?? ctx.query.str("topic");
  if (!id) throw new BrokerError("bad_request", 'Missing "id": send the Message object to requeue');
  if (!topic) throw new BrokerError("invalid_name", 'Missing "topic": send the Message object');
  checkName(topic, "topic");
  const delay = ctx.query.str("delay") ?? optString(body, "delay");
  const reason = ctx.query.str("reason") ?? optString(body, "reason");
  const deadLetter = body.dead_letter ?? ctx.query.bool("dead_letter");
  if (typeof deadLetter !== "boolean") {
    throw new BrokerError(
      "invalid_parameter",
      `Invalid dead_letter ${JSON.stringify(deadLetter)}: expected true or false`,
    );
  }
  const r = await ctx.broker.requeue(topic, group(ctx, body), id, {
    delayMs: delay ? durationIn(delay, "delay", MAX_TIME_MS) : undefined,
    reason: reason ? reason.slice(0, 1024) : undefined,
    deadLetter,
  });
  return json(requeuedJson(id, topic, r));
}

async function touch(_req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const by = ctx.query.duration("by", MAX_VISIBILITY_MS, 1);
  const id = ctx.params.id ?? "";
  const until = await ctx.broker.touch(topic, group(ctx), id, by);
  return json({ id, topic, visible_at: isoTime(until) } satisfies TouchAnswer);
}

async function touchBatch(req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const body = await readJson(req, ctx.accepts);
  const ids = batchIds(body, "touch");
  const by = ctx.query.str("by") ?? optString(body, "by");
  const byMs = by === undefined ? undefined : durationIn(by, "by", MAX_VISIBILITY_MS, 1);
  const { touched, notFound, until, leaseMs } = await ctx.broker.touchMany(
    topic,
    group(ctx, body),
    ids,
    byMs,
  );
  return json(
    {
      touched: touched.length,
      not_found: notFound,
      visible_at: isoTime(until),
      lease_ms: leaseMs,
    } satisfies BatchTouchAnswer,
  );
}

const CONSUME_DOC: RouteDoc = {
  operationId: "consume",
  summary: "Consume messages",
  description: "Takes up to `limit` messages (one answer carries at most 4 MiB of payload, and " +
    "always one message). Each is leased for the visibility timeout: ack it, requeue it, or it " +
    "becomes available again with `retry_count` + 1. With `limit=1` the answer is one Message, " +
    "with `limit>1` an array. An empty queue answers 404 `queue_empty` (after `timeout`). A " +
    "long-poll on a topic that does not exist creates nothing: it waits for the topic's first " +
    "message. A filter examines at most the first 1,000 ready messages. A long-poll still " +
    "waiting when the broker stops answers 503 `draining`.",
  tag: "Messages",
  params: [
    durationQuery("timeout", "Long-poll: wait this long for a message.", MAX_LONG_POLL_MS),
    intQuery("limit", "Messages to take at most.", 1, MAX_CONSUME_LIMIT, 1),
    boolQuery("auto_ack", "Ack each message as it is delivered."),
    GROUP_QUERY,
    boolQuery("peek", "Read without taking or acking anything."),
    query(
      "filter_key",
      "Only messages whose JSON object payload has this key (dots reach " +
        "nested keys); others stay for other consumers.",
      { type: "string" },
    ),
    query("filter_val", "With `filter_key`: the key's value, as text, must equal this.", {
      type: "string",
    }),
    durationQuery(
      "visibility",
      "This consume's lease (default: the topic's).",
      MAX_VISIBILITY_MS,
      1,
    ),
  ],
  ok: {
    200: {
      description: "One Message when `limit=1`, else an array of 1 to `limit` Messages.",
      json: {
        oneOf: [
          schemaRef("Message"),
          { type: "array", items: schemaRef("Message"), minItems: 1, maxItems: MAX_CONSUME_LIMIT },
        ],
      },
    },
  },
  errors: ["invalid_parameter", "invalid_duration", "queue_empty"],
};

const ACK_BATCH_DOC: RouteDoc = {
  operationId: "ackMany",
  summary: "Ack many messages",
  tag: "Messages",
  params: [GROUP_QUERY],
  body: {
    kind: "json",
    name: "BatchAckRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        ids: BATCH_IDS,
        group: { ...GROUP_NAME, description: "The group, when `?group=` is not given." },
      },
      required: ["ids"],
      additionalProperties: false,
    },
  },
  ok: { 200: { description: "What was acked; unknown ids are listed.", json: "BatchAckAnswer" } },
  errors: ["invalid_parameter"],
};

const ACK_DOC: RouteDoc = {
  operationId: "ack",
  summary: "Ack a message",
  description: "Removes a delivered message: it will not be delivered to this group again.",
  tag: "Messages",
  params: [GROUP_QUERY],
  ok: { 204: { description: "Acked." } },
  errors: ["message_not_found"],
};

const REQUEUE_DOC: RouteDoc = {
  operationId: "requeue",
  summary: "Requeue a message",
  description: "Gives a delivered message back with `retry_count` + 1; the third requeue moves " +
    "it to `{topic}.dlq`. The body is a Message as Ferry returned it (consume, peek, the " +
    "stream, the WebSocket, the in-flight list), whole: of its fields only `id`, `topic`, " +
    "`group` and `reason` are read, the broker's own copy counts for the rest. `reason` and " +
    "`delay` may come as query parameters or body fields. A field no Message has is refused.",
  tag: "Messages",
  params: [
    GROUP_QUERY,
    query("topic", "The topic, when the body has none.", TOPIC_NAME),
    query("reason", "Why (kept on the message, shown in the DLQ; 1,024 characters kept).", {
      type: "string",
    }),
    durationQuery("delay", "Hide the message this long before it is available again.", MAX_TIME_MS),
    boolQuery("dead_letter", "Move it to `{topic}.dlq` now, whatever its retry count."),
  ],
  body: {
    kind: "json",
    name: "RequeueRequest",
    required: true,
    description: "The Message object as consume answered it.",
    schema: {
      type: "object",
      properties: {
        // Every field Ferry puts in a Message (the in-flight list adds `lease_ends_at`).
        ...SCHEMAS.InFlightItem.properties,
        id: { type: "string" },
        topic: TOPIC_NAME,
        group: GROUP_NAME,
        reason: { type: "string", description: "Why; kept on the message, shown in the DLQ." },
        dead_letter: {
          type: "boolean",
          description: "Move it to `{topic}.dlq` now, whatever its retry count.",
        },
        delay: durationSchema(MAX_TIME_MS),
      },
      required: ["id"],
      additionalProperties: false,
    },
  },
  ok: { 200: { description: "Requeued or dead-lettered.", json: "RequeueAnswer" } },
  errors: ["invalid_duration", "invalid_parameter", "message_not_found"],
};

/** `?by=` of a touch, single or batch. */
const BY_QUERY = durationQuery(
  "by",
  "The new lease from now (default: the topic's visibility).",
  MAX_VISIBILITY_MS,
  1,
);

const TOUCH_BATCH_DOC: RouteDoc = {
  operationId: "touchMany",
  summary: "Extend many leases",
  description: "Sets the lease of each in-flight message `ids` names to end `by` from now " +
    "(default: the topic's visibility), as SQS's ChangeMessageVisibilityBatch does. Ids that " +
    "are not in flight (acked, requeued, lease ended) are listed in `not_found`; the others are " +
    "touched all the same.",
  tag: "Messages",
  params: [
    GROUP_QUERY,
    BY_QUERY,
  ],
  body: {
    kind: "json",
    name: "BatchTouchRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        ids: BATCH_IDS,
        by: { ...durationSchema(MAX_VISIBILITY_MS), description: "When `?by=` is not given." },
        group: { ...GROUP_NAME, description: "The group, when `?group=` is not given." },
      },
      required: ["ids"],
      additionalProperties: false,
    },
  },
  ok: {
    200: {
      description: "What was touched; ids not in flight are listed.",
      json: "BatchTouchAnswer",
    },
  },
  errors: ["invalid_parameter", "invalid_duration"],
};

const TOUCH_DOC: RouteDoc = {
  operationId: "touch",
  summary: "Extend a lease",
  tag: "Messages",
  params: [
    GROUP_QUERY,
    BY_QUERY,
  ],
  ok: { 200: { description: "The lease's new end.", json: "TouchAnswer" } },
  errors: ["invalid_duration", "message_not_found"],
};

export const consumeRoutes: Route[] = [
  {
    method: "GET",
    pattern: "/consume/:topic",
    shard: { topic: ["param:topic"], api: true },
    scope: "consume",
    handler: consume,
    mutates: true,
    doc: CONSUME_DOC,
  },
  {
    method: "POST",
    pattern: "/ack/:topic",
    shard: { topic: ["param:topic"], api: true },
    scope: "consume",
    handler: ackBatch,
    doc: ACK_BATCH_DOC,
  },
  {
    method: "POST",
    pattern: "/ack/:topic/:id",
    shard: { topic: ["param:topic"], api: true },
    scope: "consume",
    handler: ackOne,
    doc: ACK_DOC,
  },
  {
    method: "POST",
    pattern: "/requeue",
    shard: { topic: ["body:topic", "query:topic"], api: true },
    scope: "consume",
    handler: requeue,
    doc: REQUEUE_DOC,
  },
  {
    method: "POST",
    pattern: "/touch/:topic",
    shard: { topic: ["param:topic"], api: true },
    scope: "consume",
    handler: touchBatch,
    doc: TOUCH_BATCH_DOC,
  },
  {
    method: "POST",
    pattern: "/touch/:topic/:id",
    shard: { topic: ["param:topic"], api: true },
    scope: "consume",
    handler: touch,
    doc: TOUCH_DOC,
  },
];
