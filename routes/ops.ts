/** What operators read: GET /metrics, GET /api/stats, GET /api/cluster/status. */

import { type Metrics, UNMATCHED } from "./metrics.ts";
import { json } from "./http.ts";
import type { AfterHook, Ctx, Route } from "./router.ts";
import { statsJson } from "./wire.ts";

function stats(_req: Request, { broker }: Ctx): Response {
  return json(statsJson(broker, broker.now()));
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

async function metrics(_req: Request, { metrics: m }: Ctx): Promise<Response> {
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
