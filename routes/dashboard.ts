/**
 * The dashboard's JSON interface by `queue` name: publish, consume, peek, the messages in
 * flight and releasing one early, and webhooks.
 */

import { MAX_JSON_BODY_BYTES, MAX_PEEK, MAX_TIME_MS } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import {
  durationIn,
  json,
  jsonText,
  needString,
  optString,
  parseBool,
  parseIntIn,
  queueParam,
} from "./http.ts";
import { declaredLength, readJson } from "./body.ts";
import { parsePriority, PUBLISH_ERRORS, publishOrBroadcast } from "./publish.ts";
import type { Ctx, Route } from "./router.ts";
import { webhookItem } from "./webhooks.ts";
import { inFlightJson, messageJson } from "./wire.ts";
import type { ReleaseAnswer } from "../protocol/wire.ts";
import { schemaRef } from "../protocol/schemas.ts";
import {
  durationSchema,
  GROUP_NAME,
  GROUP_QUERY,
  intQuery,
  jsonAnswer,
  listAnswer,
  QUEUE_QUERY,
  type RouteDoc,
  TOPIC_NAME,
} from "./route_doc.ts";

/** Most in-flight messages one GET /api/queues/inflight lists. */
const MAX_IN_FLIGHT_LISTED = 1000;

const encoder = new TextEncoder();

async function publish(req: Request, ctx: Ctx): Promise<Response> {
  // As on /publish, the key's limit is asked before a byte is read (docs/security.md).
  const declared = declaredLength(req, MAX_JSON_BODY_BYTES);
  ctx.caller?.admit(1, declared);
  const body = await readJson(req, ctx.accepts);
  const queue = checkName(needString(body, "queue"), "queue");
  const text = needString(body, "payload");
  const payload = encoder.encode(text);
  if (payload.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${queue}": the payload is empty`);
  }
  const ttl = optString(body, "ttl");
  const delay = optString(body, "delay");
  const broadcast = body.broadcast === undefined ? false : parseBool(body.broadcast, "broadcast");
  ctx.caller?.take(0, payload.length - declared);
  return publishOrBroadcast(ctx.broker, queue, payload, {
    ttlMs: ttl ? durationIn(ttl, "ttl", MAX_TIME_MS) : undefined,
    delayMs: delay ? durationIn(delay, "delay", MAX_TIME_MS) : undefined,
    priority: parsePriority(body.priority),
  }, broadcast);
}

async function consume(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req, ctx.accepts);
  const queue = checkName(needString(body, "queue"), "queue");
  const group = optString(body, "group") ?? "";
  // A person pressing "consume" takes the message: acked on delivery unless asked otherwise.
  const autoAck = body.auto_ack === undefined ? true : parseBool(body.auto_ack, "auto_ack");
  const answer = await ctx.broker.consume(queue, {
    group: group ? checkName(group, "group") : "",
    autoAck,
  }, ([message]) => {
    if (!message) throw new BrokerError("queue_empty", `No message available in "${queue}"`);
    return JSON.stringify(messageJson(message));
  });
  return jsonText(answer);
}

function peek(_req: Request, ctx: Ctx): Response {
  const limit = ctx.query.str("limit");
  const n = limit ? parseIntIn(limit, "limit", 1, MAX_PEEK) : MAX_PEEK;
  return json(ctx.broker.peek(queueParam(ctx.query), n).map(messageJson));
}

function inFlight(_req: Request, ctx: Ctx): Response {
  const queue = queueParam(ctx.query);
  const group = ctx.query.str("group") ?? "";
  const limit = ctx.query.str("limit");
  const n = limit ? parseIntIn(limit, "limit", 1, MAX_IN_FLIGHT_LISTED) : 100;
  return json(ctx.broker.leased(queue, group, n).map(inFlightJson));
}

async function release(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req, ctx.accepts);
  const queue = checkName(needString(body, "queue"), "queue");
  const group = optString(body, "group") ?? "";
  const id = needString(body, "id");
  const r = await ctx.broker.release(queue, group ? checkName(group, "group") : "", id);
  return json(
    { id, queue, group, retry_count: r.retryCount, status: "released" } satisfies ReleaseAnswer,
  );
}

function webhooks(_req: Request, ctx: Ctx): Response {
  const queue = queueParam(ctx.query);
  if (!ctx.broker.findTopic(queue)) {
    throw new BrokerError("not_found", `Cannot list webhooks of "${queue}": no such queue`);
  }
  return json(ctx.broker.listWebhooks(queue).map((w) => webhookItem(ctx.broker, w)));
}

const PUBLISH_DOC: RouteDoc = {
  operationId: "dashboardPublish",
  summary: "Publish text",
  description: "The dashboard's publish: the payload is the UTF-8 bytes of a string.",
  tag: "Dashboard",
  body: {
    kind: "json",
    name: "DashboardPublishRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        queue: TOPIC_NAME,
        payload: { type: "string", minLength: 1 },
        ttl: durationSchema(MAX_TIME_MS),
        delay: durationSchema(MAX_TIME_MS),
        priority: schemaRef("Priority"),
        broadcast: { type: "boolean", default: false },
      },
      required: ["queue", "payload"],
      additionalProperties: false,
    },
  },
  ok: {
    201: jsonAnswer("Stored.", "PublishAnswer"),
    200: {
      description: "A broadcast.",
      json: { oneOf: [schemaRef("PublishAnswer"), schemaRef("BroadcastAnswer")] },
    },
  },
  errors: PUBLISH_ERRORS,
};

const CONSUME_DOC: RouteDoc = {
  operationId: "dashboardConsume",
  summary: "Consume one message",
  description: "Takes one message, acked on delivery unless `auto_ack` is false.",
  tag: "Dashboard",
  body: {
    kind: "json",
    name: "DashboardConsumeRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        queue: TOPIC_NAME,
        group: GROUP_NAME,
        auto_ack: { type: "boolean", default: true },
      },
      required: ["queue"],
      additionalProperties: false,
    },
  },
  ok: { 200: jsonAnswer("The message.", "Message") },
  errors: ["invalid_parameter", "queue_empty", "topic_limit_reached"],
};

const PEEK_DOC: RouteDoc = {
  operationId: "peek",
  summary: "Peek at a topic",
  description: `The next messages of the default group, at most ${MAX_PEEK}, without taking them.`,
  tag: "Dashboard",
  params: [QUEUE_QUERY, intQuery("limit", "Messages to show.", 1, MAX_PEEK, MAX_PEEK)],
  ok: { 200: listAnswer("The messages (possibly none).", "Message") },
  errors: ["invalid_parameter"],
};

const IN_FLIGHT_DOC: RouteDoc = {
  operationId: "inFlight",
  summary: "List messages in flight",
  description: "Delivered, un-acked messages of a group, soonest lease end first.",
  tag: "Dashboard",
  params: [
    QUEUE_QUERY,
    GROUP_QUERY,
    intQuery("limit", "Messages to list.", 1, MAX_IN_FLIGHT_LISTED, 100),
  ],
  ok: { 200: listAnswer("The messages (possibly none).", "InFlightItem") },
  errors: ["invalid_parameter"],
};

const RELEASE_DOC: RouteDoc = {
  operationId: "release",
  summary: "Release a message in flight",
  description: "Ends a lease early: the message is available again, its `retry_count` " +
    "unchanged (a release is not a failed attempt).",
  tag: "Dashboard",
  body: {
    kind: "json",
    name: "ReleaseRequest",
    required: true,
    schema: {
      type: "object",
      properties: { queue: TOPIC_NAME, group: GROUP_NAME, id: { type: "string" } },
      required: ["queue", "id"],
      additionalProperties: false,
    },
  },
  ok: { 200: jsonAnswer("Released.", "ReleaseAnswer") },
  errors: ["message_not_found", "not_found"],
};

const WEBHOOKS_DOC: RouteDoc = {
  operationId: "queueWebhooks",
  summary: "List a topic's webhooks",
  tag: "Dashboard",
  params: [QUEUE_QUERY],
  ok: { 200: listAnswer("The webhooks.", "WebhookItem") },
  errors: ["not_found"],
};

export const dashboardRoutes: Route[] = [
  {
    method: "POST",
    pattern: "/api/queues/publish",
    shard: { topic: ["body:queue"] },
    scope: "publish",
    handler: publish,
    doc: PUBLISH_DOC,
  },
  {
    method: "POST",
    pattern: "/api/queues/consume",
    shard: { topic: ["body:queue"] },
    scope: "consume",
    handler: consume,
    doc: CONSUME_DOC,
  },
  {
    method: "GET",
    pattern: "/api/queues/peek",
    shard: { topic: ["query:queue"] },
    scope: "consume",
    handler: peek,
    doc: PEEK_DOC,
  },
  {
    method: "GET",
    pattern: "/api/queues/inflight",
    shard: { topic: ["query:queue"] },
    scope: "consume",
    handler: inFlight,
    doc: IN_FLIGHT_DOC,
  },
  {
    method: "POST",
    pattern: "/api/queues/release",
    shard: { topic: ["body:queue", "query:queue"] },
    scope: "consume",
    handler: release,
    doc: RELEASE_DOC,
  },
  {
    method: "GET",
    pattern: "/api/queues/webhooks",
    shard: { topic: ["query:queue"] },
    scope: "admin",
    handler: webhooks,
    doc: WEBHOOKS_DOC,
  },
];
