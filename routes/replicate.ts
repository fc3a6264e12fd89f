/**
 * GET /cluster/replicate: a follower's one long-lived connection to its leader, a WebSocket.
 * The leader sends the stream (binary messages, lib/cluster/replica_stream.ts); the follower answers
 * `{"ack":index}` text frames once it has everything up to `index` on disk. Only the leader of
 * the term the follower names accepts it.
 */

import type { ReplicaLink, Session } from "../lib/api.ts";
import { BrokerError } from "../lib/errors.ts";
import type { Ctx, Route } from "./router.ts";
import { query, type RouteDoc } from "./route_doc.ts";

function replicate(req: Request, ctx: Ctx): Response {
  const { cluster, replicator } = ctx.broker;
  if (!cluster || !replicator) {
    throw new BrokerError("not_found", "This node is not part of a cluster");
  }
  const node = ctx.query.str("node") ?? "";
  const term = Number(ctx.query.str("term"));
  if (!cluster.writable || !replicator.active || term !== cluster.term) {
    throw new BrokerError(
      "electing",
      `This node does not lead term ${term} (it is ${cluster.role} in term ${cluster.term})`,
    );
  }
  if (!/\bwebsocket\b/i.test(req.headers.get("upgrade") ?? "")) {
    throw new BrokerError("bad_request", "GET /cluster/replicate is a WebSocket");
  }
  const { socket, response } = Deno.upgradeWebSocket(req, { idleTimeout: 10 });
  socket.binaryType = "arraybuffer";
  let session: Session | undefined;
  const link: ReplicaLink = {
    send: (msg) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(msg);
    },
    get bufferedAmount() {
      return socket.bufferedAmount;
    },
    close: (reason) => {
      if (socket.readyState <= WebSocket.OPEN) socket.close(1000, reason.slice(0, 120));
    },
  };
  socket.addEventListener("open", () => {
    if (!replicator.active || cluster.term !== term) {
      link.close("this node no longer leads");
      return;
    }
    session = replicator.attach(node, link);
  });
  socket.addEventListener("message", (e) => {
    if (!session || typeof e.data !== "string") return;
    try {
      const { ack } = JSON.parse(e.data);
      if (typeof ack === "number") replicator.ack(session, ack);
    } catch {
      replicator.detach(session, "it sent a malformed ack");
    }
  });
  socket.addEventListener("close", () => {
    if (session) replicator.detach(session, "its connection closed");
  });
  return response;
}

const REPLICATE_DOC: RouteDoc = {
  operationId: "replicate",
  summary: "Replication link (between nodes)",
  description: "Internal to a cluster: a follower's WebSocket to its leader, which streams its " +
    'WAL records as binary messages; the follower answers `{"ack":index}` text frames. Only ' +
    "the leader of the named term accepts it. Not for clients.",
  tag: "Operations",
  params: [
    query("node", "The follower's node id.", { type: "string" }, true),
    query("term", "The term the follower believes current.", { type: "integer", minimum: 0 }, true),
  ],
  ok: { 101: { description: "Switching Protocols: the replication stream." } },
  errors: ["not_found", "electing", "bad_request"],
  extensions: { "x-internal": true },
};

export const replicateRoutes: Route[] = [
  {
    method: "GET",
    pattern: "/cluster/replicate",
    cluster: "local", // it answers for itself whether it leads
    scope: "admin",
    handler: replicate,
    doc: REPLICATE_DOC,
  },
];
