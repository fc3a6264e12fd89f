/**
 * The route table: a row's type, the hooks that run around a route, and the matcher.
 * `/publish/:topic` style patterns split into segments, checked in order. A trailing parameter
 * may be missing (`/publish/`), so the handler can say which field.
 */

import { BrokerError } from "../lib/errors.ts";
import type { Broker } from "../lib/broker.ts";
import type { Query } from "./http.ts";
import type { Metrics } from "./metrics.ts";
import type { RouteDoc } from "./route_doc.ts";

/** Which API-key scope a route needs; `public` needs none. */
export type Scope = "publish" | "consume" | "admin" | "public";

/** What a handler receives besides the request. */
export interface Ctx {
  broker: Broker;
  /** The metrics /metrics renders and the hooks feed. */
  metrics: Metrics;
  params: Record<string, string>;
  query: Query;
  requestId: string;
  /** Requests being served right now, this one included. */
  inFlight(): number;
  /** The route table this handler serves (GET /openapi.json documents it). */
  routes: readonly Route[];
}

/** The one path a draining broker still serves (its health says it is draining). */
export const DRAIN_EXEMPT = "/healthz";

export type Handler = (req: Request, ctx: Ctx) => Response | Promise<Response>;

/** One row of the route table. */
export interface Route {
  method: string;
  pattern: string;
  scope: Scope;
  handler: Handler;
  /** A GET that changes state (consume takes messages): HEAD is refused with 405, not run. */
  mutates?: true;
  /** What GET /openapi.json says of the route; tests/routes/openapi_test.ts wants every route to have it. */
  doc?: RouteDoc;
}

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

interface Compiled extends Route {
  segments: string[];
}

/** The outcome of matching a path. */
export type Match =
  | { route: Route; params: Record<string, string> }
  | { allowed: string[] }
  | undefined;

/** A compiled route table. */
export class Router {
  readonly #routes: Compiled[];

  constructor(readonly routes: Route[]) {
    this.#routes = routes.map((r) => ({ ...r, segments: r.pattern.split("/").slice(1) }));
  }

  /** The route for a method and path, the methods the path allows (405), or undefined (404). */
  match(method: string, path: string): Match {
    const parts = path.split("/").slice(1);
    const allowed: string[] = [];
    for (const r of this.#routes) {
      const params = matchSegments(r.segments, parts);
      if (!params) continue;
      if (r.method === method || (method === "HEAD" && r.method === "GET" && !r.mutates)) {
        return { route: r, params };
      }
      allowed.push(r.method);
    }
    return allowed.length ? { allowed } : undefined;
  }
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  if (parts.length !== pattern.length) {
    // `/publish` or `/publish/` for `/publish/:topic`: match with the parameter empty.
    const missingLast = parts.length === pattern.length - 1 && pattern.at(-1)!.startsWith(":");
    if (!missingLast) return undefined;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const part = parts[i] ?? "";
    if (p.startsWith(":")) {
      try {
        params[p.slice(1)] = decodeURIComponent(part);
      } catch {
        throw new BrokerError(
          "invalid_name",
          `Invalid ${p.slice(1)} "${part}": bad percent-encoding`,
        );
      }
    } else if (p !== part) {
      return undefined;
    }
  }
  return params;
}
