/**
 * createHandler(broker): request ids, the drain gate, the route table, the hook where auth
 * checks a request before its route, and the one place errors become problem responses.
 */

import type { Broker } from "../lib/broker.ts";
import { BrokerError } from "../lib/errors.ts";
import type { Logger } from "../lib/log.ts";
import { problem, Query } from "./http.ts";
import { type Ctx, type Route, Router } from "./router.ts";
import { publishRoutes } from "./publish.ts";
import { consumeRoutes } from "./consume.ts";
import { adminRoutes } from "./admin.ts";
import { dashboardRoutes } from "./dashboard.ts";
import { healthRoutes } from "./health.ts";
import { opsRoutes } from "./ops.ts";

/** Every route of the broker, in match order. */
export const ROUTES: Route[] = [
  ...healthRoutes,
  ...publishRoutes,
  ...consumeRoutes,
  ...adminRoutes,
  ...dashboardRoutes,
  ...opsRoutes,
];

/** Runs before a matched route; a returned Response answers instead (401, 403). */
export type BeforeHook = (req: Request, route: Route, ctx: Ctx) => Response | undefined;
/** Runs after every response (metrics, access log). `route` is undefined for 404/405. */
export type AfterHook = (
  req: Request,
  route: Route | undefined,
  res: Response,
  seconds: number,
  requestId: string,
) => void;

export interface AppOptions {
  before?: BeforeHook[];
  after?: AfterHook[];
  log?: Logger;
  routes?: Route[];
}

const PROCESS_ID = crypto.randomUUID().slice(0, 8);
const REQUEST_ID = /^[A-Za-z0-9._:\-]{1,128}$/;

/** The fetch handler for Deno.serve (and `deno serve`). */
export function createHandler(broker: Broker, opts: AppOptions = {}) {
  const router = new Router(opts.routes ?? ROUTES);
  const before = opts.before ?? [];
  const after = opts.after ?? [];
  const log = opts.log ?? broker.log;
  let counter = 0;
  let inFlight = 0;

  return async function handle(req: Request): Promise<Response> {
    const t0 = performance.now();
    const given = req.headers.get("x-request-id");
    const requestId = given && REQUEST_ID.test(given)
      ? given
      : `${PROCESS_ID}-${(++counter).toString(36)}`;
    inFlight++;
    let route: Route | undefined;
    let res: Response;
    try {
      const url = req.url;
      const start = url.indexOf("/", url.indexOf("//") + 2);
      const q = url.indexOf("?", start);
      const path = q < 0 ? url.slice(start) : url.slice(start, q);
      if (broker.draining && path !== "/healthz") {
        throw new BrokerError("draining", "The broker is draining; retry on another node");
      }
      const m = router.match(req.method, path);
      if (!m) {
        throw new BrokerError("not_found", `No route for ${req.method} ${path}`);
      }
      if ("allowed" in m) {
        res = problem(
          new BrokerError("method_not_allowed", `Method ${req.method} is not allowed on ${path}`),
          requestId,
          { allow: [...new Set(m.allowed)].join(", ") },
        );
      } else {
        route = m.route;
        const ctx: Ctx = {
          broker,
          params: m.params,
          query: new Query(q < 0 ? "" : url.slice(q + 1)),
          requestId,
          inFlight: () => inFlight,
        };
        let early: Response | undefined;
        for (const hook of before) {
          early = hook(req, route, ctx);
          if (early) break;
        }
        res = early ?? await route.handler(req, ctx);
        res.headers.set("x-request-id", requestId);
      }
    } catch (e) {
      res = errorResponse(e, requestId, log, req);
    } finally {
      inFlight--;
    }
    if (!req.bodyUsed && req.body && res.status >= 400) await discardBody(req);
    const seconds = (performance.now() - t0) / 1000;
    for (const hook of after) hook(req, route, res, seconds, requestId);
    return res;
  };
}

/** Maps anything thrown to a problem response; unexpected errors are logged, never shown. */
export function errorResponse(e: unknown, requestId: string, log: Logger, req: Request): Response {
  if (e instanceof BrokerError) return problem(e, requestId);
  log.error("unhandled error", {
    request_id: requestId,
    method: req.method,
    path: new URL(req.url).pathname,
    error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
    stack: e instanceof Error ? e.stack : undefined,
  });
  return problem(new BrokerError("internal", "Internal error; see the broker log"), requestId);
}

/** Reads (and drops) a small unread body so the connection can be reused. */
async function discardBody(req: Request): Promise<void> {
  const declared = req.headers.get("content-length");
  if (declared === null || Number(declared) > 65536) return; // let the connection close instead
  try {
    await req.arrayBuffer();
  } catch { /* client gone */ }
}
