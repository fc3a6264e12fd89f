/** Topics, groups, redrive, purge, delete, and the queue listing. */

import type { Broker } from "../lib/broker.ts";
import { MAX_TIME_MS, MAX_VISIBILITY_MS } from "../lib/config.ts";
import { formatDuration } from "../lib/duration.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import { DEFAULT_GROUP, type Topic } from "../lib/topic.ts";
import type { Policy } from "../lib/wal_record.ts";
import { durationIn, json, needString, optString, parseIntIn, queueParam } from "./http.ts";
import { readJson } from "./body.ts";
import type { Ctx, Route } from "./router.ts";

/** The topic resource of CONTRACT "Success answers". */
export function topicJson(broker: Broker, t: Topic) {
  const eff = broker.effective(t);
  return {
    name: t.name,
    policy: t.settings.policy,
    retain: t.settings.retainMs ? formatDuration(t.settings.retainMs) : null,
    visibility: formatDuration(eff.visibilityMs),
    max_messages: eff.maxMessages,
    max_bytes: t.settings.maxBytes || null,
    created_at: new Date(t.settings.createdAt).toISOString(),
  };
}

/** One item of GET /api/queues (CONTRACT "Health, cluster, stats, metrics"). */
export function queueJson(broker: Broker, t: Topic, now: number) {
  const g = t.defaultGroup;
  return {
    name: t.name,
    depth: g.readyCount,
    in_flight: g.inFlightCount,
    delayed: g.delayedCount,
    held: t.messages.size,
    held_bytes: t.heldBytes,
    dlq_depth: broker.findTopic(`${t.name}.dlq`)?.messages.size ?? 0,
    groups: [...t.groups.keys()].filter((n) => n !== DEFAULT_GROUP),
    policy: t.settings.policy,
    retain: t.settings.retainMs ? formatDuration(t.settings.retainMs) : null,
    oldest_age_seconds: broker.oldestAgeSeconds(t, g, now),
  };
}

async function createTopic(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
  const name = checkName(needString(body, "name"), "topic");
  const policy = optString(body, "policy") ?? "reject";
  if (policy !== "reject" && policy !== "drop-oldest") {
    throw new BrokerError(
      "invalid_parameter",
      `Invalid policy "${policy}": expected reject or drop-oldest`,
    );
  }
  const retain = optString(body, "retain");
  const visibility = optString(body, "visibility");
  const max = body.max_messages;
  const maxBytes = body.max_bytes;
  const topic = await ctx.broker.createTopic(name, {
    policy: policy as Policy,
    retainMs: retain ? durationIn(retain, "retain", MAX_TIME_MS) : 0,
    visibilityMs: visibility ? durationIn(visibility, "visibility", MAX_VISIBILITY_MS, 1) : 0,
    maxMessages: max === undefined || max === null
      ? 0
      : parseIntIn(max, "max_messages", 1, ctx.broker.config.maxQueue),
    maxBytes: maxBytes === undefined || maxBytes === null
      ? 0
      : parseIntIn(maxBytes, "max_bytes", 1, Number.MAX_SAFE_INTEGER),
  });
  return json(topicJson(ctx.broker, topic), 201);
}

async function createGroup(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
  const topic = checkName(needString(body, "topic"), "topic");
  const group = checkName(needString(body, "group"), "group");
  return json(await ctx.broker.createGroup(topic, group), 201);
}

function listGroups(_req: Request, ctx: Ctx): Response {
  const topic = ctx.query.str("topic");
  if (!topic) throw new BrokerError("invalid_name", 'Missing query parameter "topic"');
  return json(ctx.broker.listGroups(checkName(topic, "topic")));
}

function listQueues(_req: Request, ctx: Ctx): Response {
  const now = ctx.broker.now();
  const names = [...ctx.broker.topics.keys()].sort();
  return json(names.map((n) => queueJson(ctx.broker, ctx.broker.topics.get(n)!, now)));
}

async function redrive(_req: Request, ctx: Ctx): Promise<Response> {
  return json(await ctx.broker.redrive(queueParam(ctx.query)));
}

async function purge(_req: Request, ctx: Ctx): Promise<Response> {
  return json(await ctx.broker.purge(queueParam(ctx.query)));
}

async function remove(_req: Request, ctx: Ctx): Promise<Response> {
  return json(await ctx.broker.deleteTopic(queueParam(ctx.query)));
}

export const adminRoutes: Route[] = [
  { method: "POST", pattern: "/api/topics", scope: "admin", handler: createTopic },
  { method: "POST", pattern: "/api/groups", scope: "admin", handler: createGroup },
  { method: "GET", pattern: "/api/groups", scope: "admin", handler: listGroups },
  { method: "GET", pattern: "/api/queues", scope: "admin", handler: listQueues },
  { method: "POST", pattern: "/api/queues/redrive", scope: "admin", handler: redrive },
  { method: "DELETE", pattern: "/api/queues/purge", scope: "admin", handler: purge },
  { method: "DELETE", pattern: "/api/queues/delete", scope: "admin", handler: remove },
];
