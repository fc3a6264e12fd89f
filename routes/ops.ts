/** What operators read: GET /metrics, /api/stats, /api/rates, /api/cluster/status. */

import { mergedClusterStatus, mergedMetrics, mergedRates, mergedStats } from "./shard_merge.ts";
import { RATE_INTERVAL_MS } from "../lib/api.ts";
import { type Metrics, UNMATCHED } from "./metrics.ts";
import { json } from "./http.ts";
import type { AfterHook, Ctx, Route } from "./router.ts";
import { BrokerError } from "../lib/errors.ts";
import type { RatePointJson, RatesJson } from "../protocol/wire.ts";
import { clusterStatusJson, rateJson, standaloneStatusJson, statsJson } from "./wire.ts";
import { jsonAnswer, query, type RouteDoc, TOPIC_NAME } from "./route_doc.ts";

function stats(_req: Request, { broker }: Ctx): Response {
  return json(statsJson(broker, broker.now()));
}

function rates(_req: Request, { broker, query }: Ctx): Response {
  const totals = broker.rates.totals().map(rateJson);
  const out: RatesJson = { interval_seconds: RATE_INTERVAL_MS / 1000, totals };
  const queue = query.str("queue");
  if (queue !== undefined) {
    const topic = broker.findTopic(queue);
    if (!topic) {
      throw new BrokerError("not_found", `Cannot read rates of "${queue}": no such queue`);
    }
    out.queue = queue;
    out.points = broker.rates.of(topic).map(rateJson);
  } else {
    const topics: [string, RatePointJson][] = [];
    for (const t of broker.eachTopic()) {
      const p = broker.rates.latest(t);
      if (p) topics.push([t.name, rateJson(p)]);
    }
    out.topics = Object.fromEntries(topics); // fromEntries: a topic may be named `__proto__`
  }
  return json(out);
}

function clusterStatus(req: Request, { broker }: Ctx): Response {
  const view = broker.clusterView();
  return json(view ? clusterStatusJson(view) : standaloneStatusJson(broker.nodeId, hostOf(req)));
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

const METRICS_DOC: RouteDoc = {
  operationId: "metrics",
  summary: "Prometheus metrics",
  description: "The Prometheus text exposition format; every name starts with `ferry_`.",
  tag: "Operations",
  ok: {
    200: {
      description: "The metrics.",
      content: {
        "text/plain": {
          schema: { type: "string" },
          example: 'ferry_messages_published_total{topic="orders"} 42\n',
        },
      },
    },
  },
};

const STATS_DOC: RouteDoc = {
  operationId: "stats",
  summary: "Statistics",
  description: "Totals since start-up, memory, and each topic's and group's figures.",
  tag: "Operations",
  ok: { 200: jsonAnswer("The statistics.", "Stats") },
};

const RATES_DOC: RouteDoc = {
  operationId: "rates",
  summary: "Rates over the last minutes",
  description: "The broker's events per second per interval (`totals`, oldest first) and each " +
    "topic's latest; with `?queue=`, that queue's history in `points` instead of `topics`.",
  tag: "Operations",
  params: [query("queue", "One topic's history.", TOPIC_NAME)],
  ok: { 200: jsonAnswer("The rates.", "Rates") },
  errors: ["not_found"],
};

const CLUSTER_STATUS_DOC: RouteDoc = {
  operationId: "clusterStatus",
  summary: "Cluster status",
  description: "This node's role, term, the leader and its peers; standalone, a leader of one.",
  tag: "Operations",
  ok: { 200: jsonAnswer("The status.", "ClusterStatus") },
};

export const opsRoutes: Route[] = [
  {
    method: "GET",
    pattern: "/metrics",
    shard: { all: mergedMetrics },
    scope: "metrics",
    handler: metrics,
    doc: METRICS_DOC,
    cluster: "always",
  },
  {
    method: "GET",
    pattern: "/api/stats",
    shard: { all: mergedStats },
    scope: "metrics", // the same figures as /metrics, as JSON (docs/operating.md, scopes)
    handler: stats,
    doc: STATS_DOC,
    cluster: "local",
  },
  {
    method: "GET",
    pattern: "/api/rates",
    shard: { topic: ["query:queue"], all: mergedRates },
    scope: "admin",
    handler: rates,
    doc: RATES_DOC,
  },
  {
    method: "GET",
    pattern: "/api/cluster/status",
    shard: { all: mergedClusterStatus },
    cluster: "always",
    scope: "admin",
    handler: clusterStatus,
    doc: CLUSTER_STATUS_DOC,
  },
];
