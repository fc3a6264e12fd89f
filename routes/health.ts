/** /healthz and POST /api/drain. */

import { worst } from "./shard_merge.ts";
import type { DrainAnswer, HealthJson } from "../protocol/wire.ts";
import { json } from "./http.ts";
import type { Ctx, Route } from "./router.ts";
import { jsonAnswer, type RouteDoc } from "./route_doc.ts";

function healthz(_req: Request, ctx: Ctx): Response {
  const { broker } = ctx;
  const c = broker.cluster;
  const cluster = c ? { cluster_role: c.role, cluster_term: c.term } : {};
  if (broker.draining) return json({ status: "draining", ...cluster } satisfies HealthJson, 503);
  if (!broker.healthy) return json({ status: "error", ...cluster } satisfies HealthJson, 503);
  if (c?.route().kind === "electing") {
    return json({ status: "electing", ...cluster } satisfies HealthJson, 503);
  }
  return json(
    {
      status: "ok",
      version: broker.version,
      uptime_seconds: Math.floor((broker.now() - broker.startedAt) / 1000),
      // A full disk refuses publishes only: the node stays in service so consumers can drain it.
      ...(broker.disk?.alarm ? { disk_alarm: true } : {}),
      ...cluster,
    } satisfies HealthJson,
  );
}

async function drain(_req: Request, ctx: Ctx): Promise<Response> {
  const others = ctx.inFlight() - 1;
  await ctx.broker.drain();
  ctx.broker.log.info("draining", { request_id: ctx.requestId, in_flight_requests: others });
  return json({ status: "draining", in_flight_requests: others } satisfies DrainAnswer);
}

const HEALTH_DOC: RouteDoc = {
  operationId: "health",
  summary: "Health",
  description: "200 while the broker serves; 503 while it drains, after a failed disk write, " +
    "or (cluster mode) while no leader is known. Served while draining. `disk_alarm: true` is " +
    "added while the data directory is below BROKER_DISK_FREE_LIMIT: publishes are refused " +
    "(507) but the node stays 200, so that consumers can drain it.",
  tag: "Operations",
  ok: {
    200: jsonAnswer("Healthy: `status` ok.", "Health"),
    503: jsonAnswer("Not serving: `status` draining, error or electing.", "Health"),
  },
};

const DRAIN_DOC: RouteDoc = {
  operationId: "drain",
  summary: "Drain the broker",
  description: "Marks the node draining at once: parked consumers are answered, streams and " +
    "sockets end, and every later request but GET /healthz answers 503 `draining`. Only a " +
    "restart undoes it.",
  tag: "Operations",
  ok: { 200: jsonAnswer("Draining.", "DrainAnswer") },
};

export const healthRoutes: Route[] = [
  {
    method: "GET",
    pattern: "/healthz",
    shard: { all: worst },
    scope: "public",
    handler: healthz,
    doc: HEALTH_DOC,
    cluster: "always",
    whileDraining: true,
  },
  {
    method: "POST",
    pattern: "/api/drain",
    audit: "drain",
    shard: { all: worst },
    scope: "admin",
    handler: drain,
    doc: DRAIN_DOC,
  },
];
