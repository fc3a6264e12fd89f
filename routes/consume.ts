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
import { isoTime, messageJson, requeuedJson } from "./wire.ts";
import type { BatchAckAnswer, TouchAnswer } from "../protocol/wire.ts";

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
    signal: req.signal,
  }, (messages) => {
    if (!messages.length) {
      throw new BrokerError("queue_empty", `No message available in "${topic}"`);
    }
    return JSON.stringify(limit === 1 ? messageJson(messages[0]!) : messages.map(messageJson));
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

async function ackBatch(req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const body = await readJson(req);
  const ids = body.ids;
  if (!Array.isArray(ids) || ids.length === 0 || ids.some((id) => typeof id !== "string")) {
    throw new BrokerError("invalid_parameter", 'Expected "ids": a non-empty array of message ids');
  }
  if (ids.length > MAX_BATCH_ACK) {
    throw new BrokerError(
      "invalid_parameter",
      `Too many ids: ${ids.length}; a batch ack takes at most ${MAX_BATCH_ACK}`,
    );
  }
  const { acked, notFound } = await ctx.broker.ack(topic, group(ctx, body), ids as string[]);
  return json({ acked: acked.length, not_found: notFound } satisfies BatchAckAnswer);
}

async function requeue(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
  const id = optString(body, "id");
  const topic = optString(body, "topic") ?? ctx.query.str("topic");
  if (!id) throw new BrokerError("bad_request", 'Missing "id": send the Message object to requeue');
  if (!topic) throw new BrokerError("invalid_name", 'Missing "topic": send the Message object');
  checkName(topic, "topic");
  const delay = ctx.query.str("delay") ?? optString(body, "delay");
  const reason = ctx.query.str("reason") ?? optString(body, "reason");
  const r = await ctx.broker.requeue(topic, group(ctx, body), id, {
    delayMs: delay ? durationIn(delay, "delay", MAX_TIME_MS) : undefined,
    reason: reason ? reason.slice(0, 1024) : undefined,
  });
  return json(requeuedJson(id, topic, r));
}

function touch(_req: Request, ctx: Ctx): Response {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const by = ctx.query.duration("by", MAX_VISIBILITY_MS, 1);
  const id = ctx.params.id ?? "";
  const until = ctx.broker.touch(topic, group(ctx), id, by);
  return json({ id, topic, visible_at: isoTime(until) } satisfies TouchAnswer);
}

export const consumeRoutes: Route[] = [
  { method: "GET", pattern: "/consume/:topic", scope: "consume", handler: consume, mutates: true },
  { method: "POST", pattern: "/ack/:topic", scope: "consume", handler: ackBatch },
  { method: "POST", pattern: "/ack/:topic/:id", scope: "consume", handler: ackOne },
  { method: "POST", pattern: "/requeue", scope: "consume", handler: requeue },
  { method: "POST", pattern: "/touch/:topic/:id", scope: "consume", handler: touch },
];
