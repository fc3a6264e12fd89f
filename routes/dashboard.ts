/**
 * The dashboard's JSON interface by `queue` name: publish, consume, peek, the messages in
 * flight and releasing one early, and webhooks.
 */

import { MAX_PEEK, MAX_TIME_MS } from "../lib/config.ts";
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
import { readJson } from "./body.ts";
import { parsePriority, publishOrBroadcast } from "./publish.ts";
import type { Ctx, Route } from "./router.ts";
import { list as listWebhooks } from "../lib/webhooks/registry.ts";
import { webhookItem } from "./webhooks.ts";
import { inFlightJson, messageJson } from "./wire.ts";
import type { ReleaseAnswer } from "../protocol/wire.ts";

/** Most in-flight messages one GET /api/queues/inflight lists. */
const MAX_IN_FLIGHT_LISTED = 1000;

const encoder = new TextEncoder();

async function publish(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
  const queue = checkName(needString(body, "queue"), "queue");
  const text = needString(body, "payload");
  const payload = encoder.encode(text);
  if (payload.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${queue}": the payload is empty`);
  }
  const ttl = optString(body, "ttl");
  const delay = optString(body, "delay");
  const broadcast = body.broadcast === undefined ? false : parseBool(body.broadcast, "broadcast");
  return publishOrBroadcast(ctx.broker, queue, payload, {
    ttlMs: ttl ? durationIn(ttl, "ttl", MAX_TIME_MS) : undefined,
    delayMs: delay ? durationIn(delay, "delay", MAX_TIME_MS) : undefined,
    priority: parsePriority(body.priority),
  }, broadcast);
}

async function consume(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
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
  const body = await readJson(req);
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
  return json(listWebhooks(ctx.broker, queue).map((w) => webhookItem(ctx.broker, w)));
}

export const dashboardRoutes: Route[] = [
  { method: "POST", pattern: "/api/queues/publish", scope: "publish", handler: publish },
  { method: "POST", pattern: "/api/queues/consume", scope: "consume", handler: consume },
  { method: "GET", pattern: "/api/queues/peek", scope: "consume", handler: peek },
  { method: "GET", pattern: "/api/queues/inflight", scope: "consume", handler: inFlight },
  { method: "POST", pattern: "/api/queues/release", scope: "consume", handler: release },
  { method: "GET", pattern: "/api/queues/webhooks", scope: "admin", handler: webhooks },
];
