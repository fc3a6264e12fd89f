/**
 * createHandler(broker): request ids, the site checks (routes/site_policy.ts), the drain gate,
 * the route table, the hook where auth checks a request before its route, the refusal of unknown
 * query parameters, and the one place errors become problem responses.
 */

import type { BrokerApi, MetricsSource, OpenStreams } from "../lib/api.ts";
import { BrokerError } from "../lib/errors.ts";
import type { Logger } from "../lib/log.ts";
import { acceptsOf, checkQuery } from "./accepts.ts";
import { takesQueryKey } from "./auth.ts";
import { discardBody } from "./body.ts";
import { problem, Query } from "./http.ts";
import { Metrics } from "./metrics.ts";
import { type AfterHook, type BeforeHook, type Ctx, type Route, Router } from "./router.ts";
import { dispatch, type Shards, SUBJECT_HEADER } from "./shards.ts";
import type { SitePolicy } from "./site_policy.ts";
import { publishRoutes } from "./publish.ts";
import { publishBatchRoutes } from "./publish_batch.ts";
import { consumeRoutes } from "./consume.ts";
import { adminRoutes } from "./admin.ts";
import { dashboardRoutes } from "./dashboard.ts";
import { healthRoutes } from "./health.ts";
import { opsRoutes } from "./ops.ts";
import { staticRoutes } from "./static.ts";
import { streamRoutes } from "./sse.ts";
import { webhookRoutes } from "./webhooks.ts";
import { wsRoutes } from "./ws.ts";
import { replicateRoutes } from "./replicate.ts";
import { referenceRoutes } from "./reference.ts";

/** Every route of the broker, in match order. */
export const ROUTES: Route[] = [
  ...healthRoutes,
  ...publishRoutes,
  ...publishBatchRoutes,
  ...consumeRoutes,
  ...adminRoutes,
  ...dashboardRoutes,
  ...opsRoutes,
  ...streamRoutes(),
  ...wsRoutes(),
  ...webhookRoutes,
  ...replicateRoutes,
  ...staticRoutes(),
  ...referenceRoutes,
];

export interface AppOptions {
  /** The broker's metrics (default: a registry of this handler's own, without process metrics). */
  metrics?: Metrics;
  before?: BeforeHook[];
  after?: AfterHook[];
  log?: Logger;
  routes?: Route[];
  /** With several workers: this worker's place, and how it asks the others (routes/shards.ts). */
  shards?: Shards;
  /** Where SSE streams and WebSockets opened with a key are kept, so a key reload ends them. */
  streams?: OpenStreams;
  /** Which hosts and browser origins may drive the broker (default: any). */
  site?: SitePolicy;
}

/**
 * The fetch handler, and `forwarded` for a request another worker handed over: that one is
 * answered here whatever its topic, and counted (metrics, access log) by the worker that took it.
 */
export type BrokerHandler = ((req: Request, info?: Deno.ServeHandlerInfo) => Promise<Response>) & {
  forwarded(req: Request): Promise<Response>;
};

const PROCESS_ID = crypto.randomUUID().slice(0, 8);
const REQUEST_ID = /^[A-Za-z0-9._:\-]{1,128}$/;

/** The fetch handler for Deno.serve (and `deno serve`). */
export function createHandler(
  broker: BrokerApi & MetricsSource,
  opts: AppOptions = {},
): BrokerHandler {
  const router = new Router(opts.routes ?? ROUTES, (r) => acceptsOf(r, takesQueryKey(r)));
  const before = opts.before ?? [];
  const after = opts.after ?? [];
  const log = opts.log ?? broker.log;
  const metrics = opts.metrics ?? new Metrics({ process: false }).attach(broker);
  let counter = 0;
  let inFlight = 0;
  const inFlightNow = () => inFlight;
  const site = opts.site;

  const shards = opts.shards;
  async function serve(
    req: Request,
    forwarded: boolean,
    info?: Deno.ServeHandlerInfo,
  ): Promise<Response> {
    const t0 = performance.now();
    const given = req.headers.get("x-request-id");
    const requestId = given && REQUEST_ID.test(given)
      ? given
      : `${PROCESS_ID}-${(++counter).toString(36)}`;
    inFlight++;
    let route: Route | undefined;
    let ctx: Ctx | undefined;
    let path = "";
    let res: Response;
    try {
      const target = requestTarget(req);
      path = target.path;
      // A forwarded request was checked by the worker that took it.
      if (site && !forwarded) site.checkHost(target.origin);
      const m = router.match(req.method, path);
      if (site && !forwarded && m && "route" in m) {
        route = m.route;
        site.checkSite(req, m.route, target.origin, path);
      }
      if (broker.draining && !(m && "route" in m && m.route.whileDraining)) {
        throw broker.drainingError();
      }
      if (!m) {
        throw new BrokerError("not_found", `No route for ${req.method} ${shown(path)}`);
      }
      if ("allowed" in m) {
        res = problem(
          new BrokerError(
            "method_not_allowed",
            `Method ${shown(req.method)} is not allowed on ${shown(path)}`,
          ),
          requestId,
          { allow: [...new Set(m.allowed)].join(", ") },
        );
      } else {
        route = m.route;
        ctx = {
          broker,
          metrics,
          params: m.params,
          query: new Query(target.search),
          accepts: m.accepts,
          requestId,
          inFlight: inFlightNow,
          routes: router.routes,
          streams: opts.streams,
          remote: () => {
            const addr = info?.remoteAddr;
            return addr?.transport === "tcp" ? addr.hostname : undefined;
          },
        };
        let early: Response | undefined;
        for (const hook of before) {
          early = hook(req, route, ctx);
          if (early) break;
        }
        // After the hooks (auth, a follower's redirect), before the handler reads anything.
        if (!early && target.search !== "") checkQuery(ctx.query, ctx.accepts);
        res = early ??
          await (shards && !forwarded
            ? dispatch(shards, route, req, ctx)
            : route.handler(req, ctx));
        res.headers.set("x-request-id", requestId);
      }
    } catch (e) {
      res = errorResponse(e, requestId, log, req.method, path);
    } finally {
      inFlight--;
    }
    // Status first: `req.body` makes a ReadableStream, even for a GET, when first read.
    if (res.status >= 400 && !req.bodyUsed && req.body) await discardBody(req);
    if (forwarded) {
      if (ctx?.subject !== undefined) res.headers.set(SUBJECT_HEADER, ctx.subject);
      return res;
    }
    const seconds = (performance.now() - t0) / 1000;
    for (const hook of after) {
      try {
        hook(req, route, res, seconds, requestId, ctx);
      } catch (e) {
        log.error("after-hook failed", { request_id: requestId, error: e });
      }
    }
    return res;
  }
  const handle = (req: Request, info?: Deno.ServeHandlerInfo) => serve(req, false, info);
  return Object.assign(handle, { forwarded: (req: Request) => serve(req, true) });
}

/**
 * The origin (`scheme://authority`), path and query of a request; 400 when its URL cannot be
 * read (a bad Host header).
 */
function requestTarget(req: Request): { origin: string; path: string; search: string } {
  let url: string;
  try {
    url = req.url;
  } catch {
    throw new BrokerError("bad_request", "Cannot read the request URL: check the Host header");
  }
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return { origin: url, path: "/", search: "" };
  const origin = url.slice(0, start);
  const q = url.indexOf("?", start);
  return q < 0
    ? { origin, path: url.slice(start), search: "" }
    : { origin, path: url.slice(start, q), search: url.slice(q + 1) };
}

/** A value from the request for an error message: bounded, so a huge path stays out of logs. */
function shown(v: string): string {
  return v.length > 200 ? `${v.slice(0, 200)}…` : v;
}

/**
 * Maps anything thrown to a problem response; unexpected errors are logged, never shown. It
 * cannot throw itself: it is the last step before the runtime would answer a bare 500.
 */
function errorResponse(
  e: unknown,
  requestId: string,
  log: Logger,
  method: string,
  path: string,
): Response {
  if (e instanceof BrokerError) return problem(e, requestId);
  try {
    log.error("unhandled error", {
      request_id: requestId,
      method,
      path: shown(path),
      error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
      stack: e instanceof Error ? e.stack : undefined,
    });
  } catch { /* the log line is lost; the answer still goes out */ }
  return problem(new BrokerError("internal", "Internal error; see the broker log"), requestId);
}
