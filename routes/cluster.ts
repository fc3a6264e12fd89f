/**
 * Cluster mode's place in the request path: a follower sends what it does not serve itself to
 * the leader with a 307 (same path and query), and while no leader is known the broker answers
 * 503 `electing`. docs/cluster.md lists what a follower serves from its own copy.
 */

import type { ClusterState } from "../lib/cluster/state.ts";
import { BrokerError } from "../lib/errors.ts";
import { problem } from "./http.ts";
import type { BeforeHook } from "./router.ts";

/** Routes every node answers itself, leader or not (the API reference is the same everywhere). */
export const LOCAL: ReadonlySet<string> = new Set([
  "/healthz",
  "/metrics",
  "/api/cluster/status",
  "/api/stats",
  "/stream/:topic",
  "/cluster/replicate", // it answers for itself whether it leads
  "/dashboard/:file", // public files, the same on every node
  "/openapi.json",
  "/asyncapi.json",
  "/docs",
  "/docs/:file",
]);
/** Routes a node answers even while no leader is known. */
export const WHILE_ELECTING: ReadonlySet<string> = new Set([
  "/healthz",
  "/metrics",
  "/api/cluster/status",
  "/dashboard/:file",
  "/openapi.json",
  "/asyncapi.json",
  "/docs",
  "/docs/:file",
]);

/** The BeforeHook that redirects to the leader or answers 503 while electing. */
export function clusterHook(state: ClusterState): BeforeHook {
  return (req, route, ctx) => {
    const where = state.route();
    if (where.kind === "here") return;
    if (where.kind === "electing") {
      if (WHILE_ELECTING.has(route.pattern)) return;
      return problem(
        new BrokerError("electing", "No leader is elected yet; retry in a moment"),
        ctx.requestId,
      );
    }
    if (LOCAL.has(route.pattern)) return;
    const url = new URL(req.url);
    return new Response(null, {
      status: 307,
      headers: { location: where.url + url.pathname + url.search, "x-request-id": ctx.requestId },
    });
  };
}
