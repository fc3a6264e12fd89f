/** Topics (create, read, delete), groups, redrive, purge, delete, and the queue listing. */

import { joinedList } from "./shard_merge.ts";
import { MAX_TIME_MS, MAX_VISIBILITY_MS } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import type { Policy } from "../protocol/wire.ts";
import { durationIn, json, needString, optString, parseIntIn, queueParam } from "./http.ts";
import type { Accepts } from "./accepts.ts";
import { readJson, readOptionalJson } from "./body.ts";
import type { Ctx, Route } from "./router.ts";
import { groupJson, queueJson, topicJson } from "./wire.ts";
import {
  durationSchema,
  GROUP_NAME,
  jsonAnswer,
  listAnswer,
  query,
  QUEUE_QUERY,
  type RouteDoc,
  TOPIC_NAME,
} from "./route_doc.ts";

async function createTopic(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req, ctx.accepts);
  const name = checkName(needString(body, "name"), "topic");
  ctx.subject = name;
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
function listTopics(_req: Request, ctx: Ctx): Response {
  const { broker } = ctx;
  const all = [...broker.eachTopic()].sort((a, b) => a.name < b.name ? -1 : 1);
  return json(all.map((t) => topicJson(broker, t)));
}

function readTopic(_req: Request, ctx: Ctx): Response {
  const { broker } = ctx;
  const name = checkName(ctx.params.name ?? "", "topic");
  const topic = broker.findTopic(name);
  if (!topic) throw new BrokerError("not_found", `Cannot read topic "${name}": no such topic`);
  return json(topicJson(broker, topic));
}

async function createGroup(req: Request, ctx: Ctx): Promise<Response> {
  const body = await readJson(req, ctx.accepts);
  const topic = checkName(needString(body, "topic"), "topic");
  const group = checkName(needString(body, "group"), "group");
  ctx.subject = `${topic}/${group}`;
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
  const ids = await optionalIds(req, ctx.accepts);
  const { topic, source, moved } = await ctx.broker.redrive(queue, ids);
  return json({ queue: topic, source, moved });
}

/** The `ids` of an optional JSON body: undefined without a body. */
async function optionalIds(req: Request, accepts: Accepts): Promise<string[] | undefined> {
  const body = await readOptionalJson(req, accepts);
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

/** DELETE /api/topics/{name}: the REST form of DELETE /api/queues/delete, the same answer. */
async function deleteTopic(_req: Request, ctx: Ctx): Promise<Response> {
  const name = checkName(ctx.params.name ?? "", "topic");
  await ctx.broker.deleteTopic(name);
  return json({ queue: name, deleted: true });
}

const CREATE_TOPIC_DOC: RouteDoc = {
  operationId: "createTopic",
  summary: "Create a topic",
  description: "Creates a topic in advance, with its settings (a publish creates one with the " +
    "defaults).",
  tag: "Topics",
  body: {
    kind: "json",
    name: "CreateTopicRequest",
    required: true,
    schema: {
      type: "object",
      properties: {
        name: TOPIC_NAME,
        policy: {
          type: "string",
          enum: ["reject", "drop-oldest"],
          default: "reject",
          description: "What a publish to a full topic does.",
        },
        retain: { ...durationSchema(MAX_TIME_MS), description: "A TTL for every message." },
        visibility: {
          ...durationSchema(MAX_VISIBILITY_MS, 1),
          description: "The lease of a delivered message (default BROKER_VISIBILITY).",
        },
        max_messages: {
          type: "integer",
          minimum: 1,
          description: "Messages held at most (default and limit BROKER_MAX_QUEUE).",
        },
        max_bytes: { type: "integer", minimum: 1, description: "Payload bytes held at most." },
      },
      required: ["name"],
      additionalProperties: false,
    },
  },
  ok: { 201: jsonAnswer("Created.", "Topic") },
  errors: [
    "invalid_parameter",
    "invalid_duration",
    "already_exists",
    "topic_limit_reached",
  ],
};

const LIST_TOPICS_DOC: RouteDoc = {
  operationId: "topics",
  summary: "List the topics' settings",
  description: "Every topic as `POST /api/topics` answers it, sorted by name.",
  tag: "Topics",
  ok: { 200: listAnswer("Every topic.", "Topic") },
};

const READ_TOPIC_DOC: RouteDoc = {
  operationId: "topic",
  summary: "Read a topic's settings",
  description: "The topic as `POST /api/topics` answers it.",
  tag: "Topics",
  ok: { 200: jsonAnswer("The topic.", "Topic") },
  errors: ["not_found"],
};

const CREATE_GROUP_DOC: RouteDoc = {
  operationId: "createGroup",
  summary: "Create a consumer group",
  description: "A named group receives every message published after its creation (a first " +
    "consume with `?group=` creates one too).",
  tag: "Topics",
  body: {
    kind: "json",
    name: "CreateGroupRequest",
    required: true,
    schema: {
      type: "object",
      properties: { topic: TOPIC_NAME, group: { ...GROUP_NAME, minLength: 1 } },
      required: ["topic", "group"],
      additionalProperties: false,
    },
  },
  ok: { 201: jsonAnswer("Created.", "Group") },
  errors: ["already_exists", "topic_limit_reached"],
};

const LIST_GROUPS_DOC: RouteDoc = {
  operationId: "groups",
  summary: "List a topic's consumer groups",
  description: "The named groups (not the default group, nor webhooks' own).",
  tag: "Topics",
  params: [query("topic", "The topic.", TOPIC_NAME, true)],
  ok: { 200: listAnswer("The groups.", "Group") },
  errors: ["not_found"],
};

const LIST_QUEUES_DOC: RouteDoc = {
  operationId: "queues",
  summary: "List the topics",
  tag: "Topics",
  ok: { 200: listAnswer("Every topic with its figures.", "QueueItem") },
};

const REDRIVE_DOC: RouteDoc = {
  operationId: "redrive",
  summary: "Redrive the dead-letter queue",
  description: "Moves the messages of `{queue}.dlq` back to `{queue}` with `retry_count` 0 and " +
    "`redrive_count` + 1: all of them, or with a body only those `ids`.",
  tag: "Topics",
  params: [QUEUE_QUERY],
  body: {
    kind: "json",
    name: "RedriveRequest",
    required: false,
    schema: {
      type: "object",
      properties: { ids: { type: "array", items: { type: "string" } } },
      required: ["ids"],
      additionalProperties: false,
    },
  },
  ok: { 200: jsonAnswer("Moved.", "RedriveAnswer") },
  errors: ["not_found"],
};

const PURGE_DOC: RouteDoc = {
  operationId: "purge",
  summary: "Purge a topic",
  description: "Removes every message; the topic, its groups and settings stay.",
  tag: "Topics",
  params: [QUEUE_QUERY],
  ok: { 200: jsonAnswer("Purged.", "PurgeAnswer") },
  errors: ["not_found"],
};

const DELETE_DOC: RouteDoc = {
  operationId: "deleteTopic",
  summary: "Delete a topic",
  description: "Deletes the topic, its messages, groups, webhooks and WAL file " +
    "(`DELETE /api/topics/{name}` does the same).",
  tag: "Topics",
  params: [QUEUE_QUERY],
  ok: { 200: jsonAnswer("Deleted.", "DeleteAnswer") },
  errors: ["not_found"],
};

const DELETE_TOPIC_DOC: RouteDoc = {
  operationId: "deleteTopicByName",
  summary: "Delete a topic",
  description: "Deletes the topic, its messages, groups, webhooks and WAL file, as " +
    "`DELETE /api/queues/delete?queue=` does, with the same answer.",
  tag: "Topics",
  ok: { 200: jsonAnswer("Deleted.", "DeleteAnswer") },
  errors: ["not_found"],
};

export const adminRoutes: Route[] = [
  {
    method: "POST",
    pattern: "/api/topics",
    audit: "topic.create",
    shard: { topic: ["body:name"] },
    scope: "admin",
    handler: createTopic,
    doc: CREATE_TOPIC_DOC,
  },
  {
    method: "GET",
    pattern: "/api/topics",
    shard: { all: joinedList("name") },
    scope: "admin",
    handler: listTopics,
    doc: LIST_TOPICS_DOC,
  },
  {
    method: "GET",
    pattern: "/api/topics/:name",
    shard: { topic: ["param:name"] },
    scope: "admin",
    handler: readTopic,
    doc: READ_TOPIC_DOC,
  },
  {
    method: "DELETE",
    pattern: "/api/topics/:name",
    audit: "topic.delete",
    shard: { topic: ["param:name"] },
    scope: "admin",
    handler: deleteTopic,
    doc: DELETE_TOPIC_DOC,
  },
  {
    method: "POST",
    pattern: "/api/groups",
    audit: "group.create",
    shard: { topic: ["body:topic"] },
    scope: "admin",
    handler: createGroup,
    doc: CREATE_GROUP_DOC,
  },
  {
    method: "GET",
    pattern: "/api/groups",
    shard: { topic: ["query:topic"] },
    scope: "admin",
    handler: listGroups,
    doc: LIST_GROUPS_DOC,
  },
  {
    method: "GET",
    pattern: "/api/queues",
    shard: { all: joinedList("name") },
    scope: "admin",
    handler: listQueues,
    doc: LIST_QUEUES_DOC,
  },
  {
    method: "POST",
    pattern: "/api/queues/redrive",
    audit: "queue.redrive",
    shard: { topic: ["query:queue"] },
    scope: "admin",
    handler: redrive,
    doc: REDRIVE_DOC,
  },
  {
    method: "DELETE",
    pattern: "/api/queues/purge",
    audit: "queue.purge",
    shard: { topic: ["query:queue"] },
    scope: "admin",
    handler: purge,
    doc: PURGE_DOC,
  },
  {
    method: "DELETE",
    pattern: "/api/queues/delete",
    audit: "topic.delete",
    shard: { topic: ["query:queue"] },
    scope: "admin",
    handler: remove,
    doc: DELETE_DOC,
  },
];
