/** Topics, groups, redrive, purge, delete, and the queue listing. */

import { MAX_TIME_MS, MAX_VISIBILITY_MS } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import type { Policy } from "../lib/wal_record.ts";
import { durationIn, json, needString, optString, parseIntIn, queueParam } from "./http.ts";
import { readJson, readOptionalJson } from "./body.ts";
import type { Ctx, Route } from "./router.ts";
import { groupJson, queueJson, topicJson } from "./wire.ts";

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

/** GET /api/topics/{name}: one topic's settings; GET /api/topics: every topic's, by name. */
function readTopics(_req: Request, ctx: Ctx): Response {
  const { broker } = ctx;
  if (!ctx.params.name) {
    const all = [...broker.eachTopic()].sort((a, b) => a.name < b.name ? -1 : 1);
    return json(all.map((t) => topicJson(broker, t)));
  }
  const name = checkName(ctx.params.name, "topic");
  const topic = broker.findTopic(name);
  if (!topic) throw new BrokerError("not_found", `Cannot read topic "${name}": no such topic`);
  return json(topicJson(broker, topic));
}

async function createGroup(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req);
  const topic = checkName(needString(body, "topic"), "topic");
  const group = checkName(needString(body, "group"), "group");
  return json(groupJson(topic, await ctx.broker.createGroup(topic, group)), 201);
}

function listGroups(_req: Request, ctx: Ctx): Response {
  const topic = ctx.query.str("topic");
  if (!topic) throw new BrokerError("invalid_name", 'Missing query parameter "topic"');
  const name = checkName(topic, "topic");
  return json(ctx.broker.listGroups(name).map((g) => groupJson(name, g)));
}

function listQueues(_req: Request, ctx: Ctx): Response {
  return json(ctx.broker.stats.figures(ctx.broker.now()).map(queueJson));
}

/** Redrives the whole DLQ, or with a body `{"ids":[…]}` only those messages. */
async function redrive(req: Request, ctx: Ctx): Promise<Response> {
  const queue = queueParam(ctx.query);
  const ids = await optionalIds(req);
  const { topic, source, moved } = await ctx.broker.redrive(queue, ids);
  return json({ queue: topic, source, moved });
}

/** The `ids` of an optional JSON body: undefined without a body. */
async function optionalIds(req: Request): Promise<string[] | undefined> {
  const body = await readOptionalJson(req);
  if (!body) return undefined;
  const ids = body.ids;
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== "string")) {
    throw new BrokerError("bad_request", 'Expected "ids": an array of message ids');
  }
  return ids;
}

async function purge(_req: Request, ctx: Ctx): Promise<Response> {
  const queue = queueParam(ctx.query);
  return json({ queue, purged: await ctx.broker.purge(queue) });
}

async function remove(_req: Request, ctx: Ctx): Promise<Response> {
  const queue = queueParam(ctx.query);
  await ctx.broker.deleteTopic(queue);
  return json({ queue, deleted: true });
}

export const adminRoutes: Route[] = [
  { method: "POST", pattern: "/api/topics", scope: "admin", handler: createTopic },
  { method: "GET", pattern: "/api/topics/:name", scope: "admin", handler: readTopics },
  { method: "POST", pattern: "/api/groups", scope: "admin", handler: createGroup },
  { method: "GET", pattern: "/api/groups", scope: "admin", handler: listGroups },
  { method: "GET", pattern: "/api/queues", scope: "admin", handler: listQueues },
  { method: "POST", pattern: "/api/queues/redrive", scope: "admin", handler: redrive },
  { method: "DELETE", pattern: "/api/queues/purge", scope: "admin", handler: purge },
  { method: "DELETE", pattern: "/api/queues/delete", scope: "admin", handler: remove },
];
