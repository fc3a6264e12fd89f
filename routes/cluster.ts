/**
 * Cluster mode's place in the request path: a follower sends what it does not serve itself to
 * the leader with a 307 (same path and query), and while no leader is known the broker answers
 * 503 `electing`. Each route row says which it is (`Route.cluster`); docs/cluster.md lists what a
 * follower serves from its own copy.
 */

import type { ClusterState } from "../lib/api.ts";
import { BrokerError } from "../lib/errors.ts";
import { problem } from "./http.ts";
import type { BeforeHook } from "./router.ts";

/** The BeforeHook that redirects to the leader or answers 503 while electing. */
export function clusterHook(state: ClusterState): BeforeHook {
  return (req, route, ctx) => {
    const where = state.route();
    if (where.kind === "here") return;
    if (where.kind === "electing") {
      if (route.cluster === "always") return;
      return problem(
        new BrokerError("electing", "No leader is elected yet; retry in a moment"),
        ctx.requestId,
      );
    }
    if (route.cluster === "local" || route.cluster === "always") return;
    const url = new URL(req.url);
    return new Response(null, {
      status: 307,
      headers: { location: where.url + url.pathname + url.search, "x-request-id": ctx.requestId },
    });
  };
}
