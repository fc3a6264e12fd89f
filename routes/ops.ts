/** What operators read: GET /metrics, GET /api/stats, GET /api/cluster/status. */

import type { Broker } from "../lib/broker.ts";
import type { Group } from "../lib/group.ts";
import type { Topic } from "../lib/topic.ts";
import { Metrics, UNMATCHED } from "../lib/metrics.ts";
import { json } from "./http.ts";
import type { AfterHook, Ctx, Route } from "./router.ts";

/** One group's (or, for the default group, one topic's) queue figures, as /api/queues counts. */
function groupStats(broker: Broker, topic: Topic, g: Group, now: number) {
  return {
    depth: g.readyCount,
    in_flight: g.inFlightCount,
    delayed: g.delayedCount,
    oldest_age_seconds: broker.oldestAgeSeconds(topic, g, now),
  };
}

function stats(_req: Request, { broker }: Ctx): Response {
  const now = broker.now();
  const t = broker.totals;
  // fromEntries: a topic or group may be named `__proto__`.
  const topics = Object.fromEntries(
    [...broker.topics.values()].sort((a, b) => a.name < b.name ? -1 : 1).map((topic) => [
      topic.name,
      {
        ...groupStats(broker, topic, topic.defaultGroup, now),
        held_bytes: topic.heldBytes,
        groups: Object.fromEntries(
          [...topic.groups.values()].map((g) => [g.name, groupStats(broker, topic, g, now)]),
        ),
      },
    ]),
  );
  return json({
    uptime_seconds: Math.floor((now - broker.startedAt) / 1000),
    totals: {
      published: t.published,
      delivered: t.delivered,
      acked: t.acked,
      requeued: t.requeued,
      dead_lettered: t.deadLettered,
      expired: t.expired,
    },
    memory: {
      held_bytes: broker.memory.held,
      budget_bytes: broker.memory.budget,
      drain_bytes_per_second: Math.round(broker.memory.drainRate),
    },
    topics,
  });
}

function clusterStatus(req: Request, { broker }: Ctx): Response {
  // Standalone, this node leads itself; its address is the one the caller reached it at.
  return json({
    mode: "standalone",
    node_id: broker.nodeId,
    role: "leader",
    term: 0,
    leader: hostOf(req),
    peers: [],
  });
}

/** The Host the caller used, when it looks like an authority (it is the client's to set). */
function hostOf(req: Request): string | null {
  const host = req.headers.get("host");
  return host && HOST.test(host) ? host : null;
}
const HOST = /^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

async function metrics(_req: Request, { broker }: Ctx): Promise<Response> {
  const m = Metrics.of(broker);
  return new Response(await m.render(), { headers: { "content-type": m.contentType } });
}

/** The AfterHook that feeds ferry_http_requests_total and the duration histogram. */
export function metricsHook(m: Metrics): AfterHook {
  return (_req, route, res, seconds) =>
    m.recordRequest(route?.pattern ?? UNMATCHED, res.status, seconds);
}

export const opsRoutes: Route[] = [
  { method: "GET", pattern: "/metrics", scope: "admin", handler: metrics },
  { method: "GET", pattern: "/api/stats", scope: "admin", handler: stats },
  { method: "GET", pattern: "/api/cluster/status", scope: "admin", handler: clusterStatus },
];
