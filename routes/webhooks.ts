/**
 * Webhooks: POST /webhook/{topic} registers one (CONTRACT "Webhooks"); operators list them,
 * delete one, and read its recent attempts. The secret is never shown.
 */

import { checkName } from "../lib/names.ts";
import type { Webhook } from "../lib/webhooks/registry.ts";
import * as webhooks from "../lib/webhooks/registry.ts";
import { webhookGroup } from "../lib/topic.ts";
import type { Broker } from "../lib/broker.ts";
import { BrokerError } from "../lib/errors.ts";
import { readJson } from "./body.ts";
import { json, needString, optString } from "./http.ts";
import type { Ctx, Route } from "./router.ts";
import { isoTime } from "./wire.ts";
import type { WebhookAttempt, WebhookDeleted, WebhookItem, WebhookJson } from "../protocol/wire.ts";

/** The registration answer: no secret, only whether there is one. */
export function webhookJson(w: Webhook): WebhookJson {
  return {
    id: w.id,
    topic: w.topic.name,
    url: w.url,
    signed: w.secret !== "",
    created_at: isoTime(w.createdAt),
  };
}

/** A listed webhook: its state, what its group still owes, and its last attempt. */
export function webhookItem(broker: Broker, w: Webhook): WebhookItem {
  const g = w.topic.groups.get(webhookGroup(w.id));
  const last = broker.pushers?.attempts(w.id)[0];
  return {
    ...webhookJson(w),
    state: broker.pushers?.paused(w.id) ? "paused" : "active",
    pending: g ? g.held : 0,
    last_attempt: last
      ? {
        at: isoTime(last.at),
        status: last.status,
        latency_ms: last.latencyMs,
        outcome: last.outcome,
        error: last.error ?? null,
      }
      : null,
  };
}

async function register(req: Request, ctx: Ctx): Promise<Response> {
  const topic = checkName(ctx.params.topic ?? "", "topic");
  const body = await readJson(req);
  const url = needString(body, "url");
  const secret = optString(body, "secret");
  const w = await ctx.broker.registerWebhook(topic, url, secret);
  return json(webhookJson(w), 201);
}

function list(_req: Request, ctx: Ctx): Response {
  const topic = ctx.query.str("topic");
  return json(webhooks.list(ctx.broker, topic || undefined).map((w) => webhookItem(ctx.broker, w)));
}

async function remove(_req: Request, ctx: Ctx): Promise<Response> {
  const w = await ctx.broker.removeWebhook(ctx.params.id ?? "");
  return json({ id: w.id, deleted: true } satisfies WebhookDeleted);
}

function attempts(_req: Request, ctx: Ctx): Response {
  const id = ctx.params.id ?? "";
  if (!webhooks.findWebhook(ctx.broker, id)) {
    throw new BrokerError("not_found", `Cannot list attempts of webhook "${id}": no such webhook`);
  }
  return json((ctx.broker.pushers?.attempts(id) ?? []).map((a) => ({
    at: isoTime(a.at),
    message_id: a.messageId,
    retry_count: a.retryCount,
    status: a.status,
    latency_ms: a.latencyMs,
    answer: a.answer,
    error: a.error ?? null,
    outcome: a.outcome,
  } satisfies WebhookAttempt)));
}

export const webhookRoutes: Route[] = [
  { method: "POST", pattern: "/webhook/:topic", scope: "admin", handler: register },
  { method: "GET", pattern: "/api/webhooks", scope: "admin", handler: list },
  { method: "DELETE", pattern: "/api/webhooks/:id", scope: "admin", handler: remove },
  { method: "GET", pattern: "/api/webhooks/:id/attempts", scope: "admin", handler: attempts },
];
