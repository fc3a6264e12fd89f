/**
 * Webhooks: POST /webhook/{topic} registers one (docs/api/webhooks.md); operators list them,
 * delete one, and read its recent attempts. The secret is never shown.
 */

import { firstFound, joinedList } from "./shard_merge.ts";
import { type BrokerApi, MAX_WEBHOOK_URL_CHARS, type Webhook } from "../lib/api.ts";
import { checkName } from "../lib/names.ts";
import { BrokerError } from "../lib/errors.ts";
import { readJson } from "./body.ts";
import { json, needString, optString } from "./http.ts";
import type { Ctx, Route } from "./router.ts";
import { auditedUrl } from "./audit.ts";
import { isoTime } from "./wire.ts";
import type { WebhookAttempt, WebhookDeleted, WebhookItem, WebhookJson } from "../protocol/wire.ts";
import {
  jsonAnswer,
  listAnswer,
  type Param,
  query,
  type RouteDoc,
  TOPIC_NAME,
} from "./route_doc.ts";

/** The registration answer: no secret, only whether there is one. */
export function webhookJson(w: Webhook): WebhookJson {
  return {
    id: w.id,
    topic: w.topic.name,
    url: w.url,
    signed: w.secret !== "" || w.sealedSecret !== undefined,
    created_at: isoTime(w.createdAt),
  };
}

/** A listed webhook: its state, what its group still owes, and its last attempt. */
export function webhookItem(broker: BrokerApi, w: Webhook): WebhookItem {
  const { paused, pending, last } = broker.webhookStatus(w);
  return {
    ...webhookJson(w),
    state: paused ? "paused" : "active",
    pending,
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
  const body = await readJson(req, ctx.accepts);
  const url = needString(body, "url");
  ctx.subject = auditedUrl(url); // refused or not, the audit line names the address
  const secret = optString(body, "secret");
  const w = await ctx.broker.registerWebhook(topic, url, secret);
  return json(webhookJson(w), 201);
}

function list(_req: Request, ctx: Ctx): Response {
  const topic = ctx.query.str("topic");
  return json(ctx.broker.listWebhooks(topic || undefined).map((w) => webhookItem(ctx.broker, w)));
}

async function remove(_req: Request, ctx: Ctx): Promise<Response> {
  const w = await ctx.broker.removeWebhook(ctx.params.id ?? "");
  ctx.subject = auditedUrl(w.url);
  return json({ id: w.id, deleted: true } satisfies WebhookDeleted);
}

function attempts(_req: Request, ctx: Ctx): Response {
  const id = ctx.params.id ?? "";
  if (!ctx.broker.findWebhook(id)) {
    throw new BrokerError("not_found", `Cannot list attempts of webhook "${id}": no such webhook`);
  }
  return json(
    ctx.broker.webhookAttempts(id).map((a) => ({
      at: isoTime(a.at),
      message_id: a.messageId,
      retry_count: a.retryCount,
      status: a.status,
      latency_ms: a.latencyMs,
      answer: a.answer,
      error: a.error ?? null,
      outcome: a.outcome,
    } satisfies WebhookAttempt)),
  );
}

const WEBHOOK_ID: Param = {
  name: "id",
  in: "path",
  required: true,
  description: "The webhook's id, as its registration answered it.",
  schema: { type: "string" },
};

const REGISTER_DOC: RouteDoc = {
  operationId: "addWebhook",
  summary: "Register a webhook",
  description: "Every message published to the topic from now on is POSTed to `url` (the " +
    "`message` webhook of this document): its own consumer group, so pull consumers keep their " +
    "copies. Any 2xx within 15 s is success, 410 removes the webhook, anything else is retried " +
    "per BROKER_WEBHOOK_RETRY_SCHEDULE and then dead-lettered.",
  tag: "Webhooks",
  body: {
    kind: "json",
    name: "WebhookRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        url: {
          type: "string",
          format: "uri",
          maxLength: MAX_WEBHOOK_URL_CHARS,
          description: "An absolute http: or https: URL.",
        },
        secret: {
          type: "string",
          maxLength: 1024,
          description: "Signs each POST; `whsec_<base64>` is used as Standard Webhooks does.",
        },
      },
      required: ["url"],
      additionalProperties: false,
    },
  },
  ok: { 201: jsonAnswer("Registered; the secret is not echoed.", "Webhook") },
  errors: ["invalid_parameter", "already_exists", "topic_limit_reached"],
};

const LIST_DOC: RouteDoc = {
  operationId: "webhooks",
  summary: "List webhooks",
  tag: "Webhooks",
  params: [query("topic", "Only this topic's.", TOPIC_NAME)],
  ok: { 200: listAnswer("The webhooks.", "WebhookItem") },
};

const DELETE_DOC: RouteDoc = {
  operationId: "deleteWebhook",
  summary: "Delete a webhook",
  tag: "Webhooks",
  path: { id: WEBHOOK_ID },
  ok: { 200: jsonAnswer("Deleted.", "WebhookDeleted") },
  errors: ["not_found"],
};

const ATTEMPTS_DOC: RouteDoc = {
  operationId: "webhookAttempts",
  summary: "A webhook's recent attempts",
  description: "Newest first, with the status, latency and first 1 KiB of each answer.",
  tag: "Webhooks",
  path: { id: WEBHOOK_ID },
  ok: { 200: listAnswer("The attempts.", "WebhookAttempt") },
  errors: ["not_found"],
};

const header = (description: string, schema: Record<string, unknown>, required = true) => ({
  in: "header",
  description,
  schema,
  required,
});

/**
 * The POST a webhook receives (lib/push/webhook_pusher.ts builds it): the document's `webhooks`
 * section. A test checks real POSTs against it.
 */
export const OUTBOUND_WEBHOOK = {
  operationId: "message",
  summary: "A message, pushed to a registered URL",
  description: "The body is the published bytes unchanged, with the publisher's Content-Type " +
    "(`application/octet-stream` when it gave none); every stored `X-MQ-*` header comes along. " +
    "With a secret, `X-Ferry-Signature` is `sha256=` and the lowercase hex HMAC-SHA256 of the " +
    "body, and the Standard Webhooks headers sign `{webhook-id}.{webhook-timestamp}.{body}`; the " +
    "key is the secret's UTF-8 bytes, or for `whsec_<base64>` the decoded bytes.",
  tags: ["Webhooks"],
  parameters: [
    ["X-Ferry-Message-Id", header("The message id.", { type: "string", format: "uuid" })],
    ["X-Ferry-Topic", header("The topic.", { type: "string" })],
    [
      "X-Ferry-Timestamp",
      header("When it was published.", { type: "string", format: "date-time" }),
    ],
    [
      "X-Ferry-Retry-Count",
      header("0 on the first attempt.", { type: "string", pattern: "^[0-9]+$" }),
    ],
    ["User-Agent", header("`ferry/<version>`.", { type: "string", pattern: "^ferry/" })],
    [
      "X-Ferry-Signature",
      header("With a secret.", { type: "string", pattern: "^sha256=[0-9a-f]{64}$" }, false),
    ],
    ["webhook-id", header("With a secret: the message id.", { type: "string" }, false)],
    [
      "webhook-timestamp",
      header("With a secret: Unix seconds of this attempt.", {
        type: "string",
        pattern: "^[0-9]+$",
      }, false),
    ],
    [
      "webhook-signature",
      header("With a secret: `v1,` and the Base64 HMAC.", {
        type: "string",
        pattern: "^v1,[A-Za-z0-9+/]+={0,2}$",
      }, false),
    ],
  ].map(([name, p]) => ({ name, ...(p as object) })),
  requestBody: {
    required: true,
    content: { "*/*": { schema: { description: "The published bytes." } } },
  },
  responses: {
    "2XX": { description: "Delivered: the message is acked for this webhook." },
    "410": { description: "Gone: the webhook is removed." },
    default: { description: "Anything else (or no answer in 15 s): retried, then dead-lettered." },
  },
};

export const webhookRoutes: Route[] = [
  {
    method: "POST",
    pattern: "/webhook/:topic",
    audit: "webhook.add",
    shard: { topic: ["param:topic"] },
    scope: "admin",
    handler: register,
    doc: REGISTER_DOC,
  },
  {
    method: "GET",
    pattern: "/api/webhooks",
    shard: { topic: ["query:topic"], all: joinedList("id") },
    scope: "admin",
    handler: list,
    doc: LIST_DOC,
  },
  {
    method: "DELETE",
    pattern: "/api/webhooks/:id",
    audit: "webhook.delete",
    shard: { all: firstFound },
    scope: "admin",
    handler: remove,
    doc: DELETE_DOC,
  },
  {
    method: "GET",
    pattern: "/api/webhooks/:id/attempts",
    shard: { all: firstFound },
    scope: "admin",
    handler: attempts,
    doc: ATTEMPTS_DOC,
  },
];
