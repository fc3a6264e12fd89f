/**
 * What the fuzzer knows of the route table: the documented query parameters and JSON fields of
 * each route (docs/api/), those of its `doc` for routes added later, paths near the table,
 * and the one route it must never call (POST /api/drain: every later request would get 503).
 */

import { ROUTES } from "../../routes/app.ts";
import type { Route } from "../../routes/router.ts";

/** The fields a parameter can hold; each has good and bad values. */
export type Kind =
  | "topic"
  | "group"
  | "queue"
  | "id"
  | "ids"
  | "duration"
  | "lease"
  | "timeout"
  | "limit"
  | "peekLimit"
  | "maxMessages"
  | "bool"
  | "priority"
  | "policy"
  | "idem"
  | "text";

/** The documented query parameters and JSON body fields of each route (docs/api/). */
export interface Spec {
  query?: Record<string, Kind>;
  json?: Record<string, Kind>;
  /** The body is the message itself (raw bytes). */
  payload?: boolean;
}

const SPECS: Record<string, Spec> = {
  "GET /healthz": {},
  "GET /metrics": {},
  "GET /api/stats": {},
  "GET /api/cluster/status": {},
  "GET /api/queues": {},
  "POST /publish/:topic": {
    query: { ttl: "duration", delay: "duration", priority: "priority", broadcast: "bool" },
    payload: true,
  },
  "GET /consume/:topic": {
    query: {
      timeout: "timeout",
      limit: "limit",
      auto_ack: "bool",
      group: "group",
      peek: "bool",
      filter_key: "text",
      filter_val: "text",
      visibility: "lease",
    },
  },
  "POST /ack/:topic": { query: { group: "group" }, json: { ids: "ids", group: "group" } },
  "POST /ack/:topic/:id": { query: { group: "group" } },
  "POST /requeue": {
    query: { reason: "text", delay: "duration", group: "group", topic: "topic" },
    json: { id: "id", topic: "topic", group: "group", reason: "text", delay: "duration" },
  },
  "POST /touch/:topic/:id": { query: { by: "lease", group: "group" } },
  "POST /api/topics": {
    json: {
      name: "topic",
      policy: "policy",
      retain: "duration",
      visibility: "lease",
      max_messages: "maxMessages",
      max_bytes: "maxMessages",
    },
  },
  "POST /api/groups": { json: { topic: "topic", group: "group" } },
  "GET /api/groups": { query: { topic: "topic" } },
  "POST /api/queues/redrive": { query: { queue: "queue" } },
  "DELETE /api/queues/purge": { query: { queue: "queue" } },
  "DELETE /api/queues/delete": { query: { queue: "queue" } },
  "POST /api/queues/publish": {
    json: {
      queue: "queue",
      payload: "text",
      ttl: "duration",
      delay: "duration",
      priority: "priority",
      broadcast: "bool",
    },
  },
  "POST /api/queues/consume": { json: { queue: "queue", group: "group", auto_ack: "bool" } },
  "GET /api/queues/peek": { query: { queue: "queue", limit: "peekLimit" } },
  "GET /api/queues/webhooks": { query: { queue: "queue" } },
};

/** The kind of a parameter or field by its name, for routes missing from SPECS. */
const KIND_OF: Record<string, Kind> = {
  topic: "topic",
  name: "topic",
  queue: "queue",
  group: "group",
  id: "id",
  ids: "ids",
  limit: "limit",
  timeout: "timeout",
  by: "lease",
  visibility: "lease",
  ttl: "duration",
  delay: "duration",
  retain: "duration",
  broadcast: "bool",
  auto_ack: "bool",
  peek: "bool",
  priority: "priority",
  policy: "policy",
  idempotency: "idem",
  max_messages: "maxMessages",
  max_bytes: "maxMessages",
};

/**
 * A route missing from SPECS (added later) gets the query parameters and JSON fields its
 * documentation names (the broker refuses any other with 400), typed by name.
 */
function documented(route: Route): Spec {
  const kind = (name: string): Kind => KIND_OF[name] ?? "text";
  const names = (route.doc?.params ?? []).filter((p) => p.in === "query").map((p) => p.name);
  const spec: Spec = { query: Object.fromEntries(names.map((n) => [n, kind(n)])) };
  const body = route.doc?.body;
  if (body?.kind === "raw") spec.payload = true;
  if (body?.kind === "json") {
    const object = (body.schema.type === "array" ? body.schema.items : body.schema) as {
      properties?: Record<string, unknown>;
    };
    spec.json = Object.fromEntries(Object.keys(object.properties ?? {}).map((n) => [n, kind(n)]));
  }
  return spec;
}

/** The parameters and fields of a route; those of its documentation for one the table gained later. */
export function specOf(route: Route): Spec {
  return SPECS[`${route.method} ${route.pattern}`] ?? documented(route);
}

/** True for the one route the fuzzer must never call: it makes every later request 503. */
export function isDrain(method: string, pathname: string): boolean {
  return pathname.replace(/\/+$/, "") === "/api/drain" || method.toUpperCase() === "DRAIN";
}

/** Every route the fuzzer covers: the whole table but POST /api/drain. */
export const FUZZED_ROUTES: Route[] = ROUTES.filter((r) => !isDrain(r.method, r.pattern));

/** Paths outside the route table, or near misses of it. */
export const STRAY_PATHS = [
  "/",
  "/publish",
  "/publish/",
  "/api",
  "/api/queues/",
  "//publish/fz-a",
  "/publish/fz-a/extra",
  "/ack/fz-a/id/extra",
  "/../../etc/passwd",
  "/%2e%2e/%2e%2e/etc/passwd",
  "/publish/fz-a%2f..%2f..%2fx",
  "/HEALTHZ",
  "/healthz/",
  "/healthz?" + "q".repeat(70_000),
  "/" + "p".repeat(20_000),
  "/dashboard",
  "/openapi.json",
  "/stream/fz-a",
  "/ws",
  "/webhook/fz-a",
];
