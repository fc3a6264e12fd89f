/**
 * GET /cluster/replicate: a follower's one long-lived connection to its leader, a WebSocket.
 * The leader sends the stream (binary messages, lib/cluster/replica_stream.ts); the follower answers
 * `{"ack":index}` text frames once it has everything up to `index` on disk. Only the leader of
 * the term the follower names accepts it. Nodes of several workers hold one connection per
 * worker (`shard`); the worker that owns the shard streams it, wherever the socket landed.
 */

import { MAX_BUFFERED_BYTES, type ReplicaHandle, type ReplicaLink } from "../lib/api.ts";
import { BrokerError } from "../lib/errors.ts";
import type { Ctx, Route } from "./router.ts";
import { query, type RouteDoc } from "./route_doc.ts";

function replicate(req: Request, ctx: Ctx): Response {
  const { broker } = ctx;
  const { cluster } = broker;
  if (!cluster) throw new BrokerError("not_found", "This node is not part of a cluster");
  const node = ctx.query.str("node") ?? "";
  const term = Number(ctx.query.str("term"));
  // A node of several workers streams each worker's topics on its own connection.
  const workers = broker.shard?.count ?? 1;
  const shard = Number(ctx.query.str("shard") ?? 0);
  const shards = Number(ctx.query.str("shards") ?? 1);
  if (shards !== workers) {
    throw new BrokerError(
      "bad_request",
      `This node runs ${workers} worker(s) and node "${node.slice(0, 64)}" ${shards}: ` +
        "every node of a cluster must run the same BROKER_WORKERS",
    );
  }
  if (!Number.isInteger(shard) || shard < 0 || shard >= workers) {
    throw new BrokerError("invalid_parameter", `shard must be 0 to ${workers - 1}`);
  }
  cluster.assertLeads(term);
  if (!/\bwebsocket\b/i.test(req.headers.get("upgrade") ?? "")) {
    throw new BrokerError("bad_request", "GET /cluster/replicate is a WebSocket");
  }
  const { socket, response } = Deno.upgradeWebSocket(req, { idleTimeout: 10 });
  socket.binaryType = "arraybuffer";
  let session: ReplicaHandle | undefined;
  let closed = false;
  const link: ReplicaLink = {
    send: (msg) => {
      if (socket.readyState !== WebSocket.OPEN) return;
      // Relayed from another worker, the stream's backlog is this socket's to watch.
      if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
        link.close("it fell too far behind");
        return;
      }
      socket.send(msg);
    },
    get bufferedAmount() {
      return socket.bufferedAmount;
    },
    close: (reason) => {
      if (socket.readyState <= WebSocket.OPEN) socket.close(1000, reason.slice(0, 120));
    },
  };
  socket.addEventListener("open", async () => {
    try {
      const s = await broker.attachReplica(shard, node, term, link);
      if (closed) s.detach("its connection closed");
      else session = s;
    } catch (e) {
      link.close(e instanceof BrokerError ? e.message : "this node no longer leads");
    }
  });
  socket.addEventListener("message", (e) => {
    if (!session || typeof e.data !== "string") return;
    let ack: unknown;
    try {
      ack = JSON.parse(e.data).ack;
    } catch {
      ack = undefined;
    }
    if (typeof ack === "number") session.ack(ack);
    else session.detach("it sent a malformed ack");
  });
  socket.addEventListener("close", () => {
    closed = true;
    session?.detach("its connection closed");
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
    query("shard", "Which worker's topics to stream (0 when the nodes run one).", {
      type: "integer",
      minimum: 0,
    }),
    query("shards", "How many workers the follower runs; must equal the leader's.", {
      type: "integer",
      minimum: 1,
    }),
  ],
  ok: { 101: { description: "Switching Protocols: the replication stream." } },
  errors: ["not_found", "electing", "bad_request", "invalid_parameter"],
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
