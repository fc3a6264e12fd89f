/**
 * One worker of a broker that runs several (BROKER_WORKERS, docs/architecture.md "Workers"): a
 * Web Worker that supervisor.ts starts. It opens a broker over the topics that hash to it (their
 * WAL files, groups, leases, webhooks and feeds are its own), listens on the port every worker
 * shares, and hands a request for another worker's topic to that worker over their link. The
 * supervisor tells it when to listen, to reload the API keys, and to shut down.
 */

/// <reference lib="deno.worker" />

import type { Config } from "./lib/config.ts";
import { Logger } from "./lib/log.ts";
import { SharedFigures } from "./lib/shard.ts";
import { Answerer, shardedBroker } from "./lib/remote_broker.ts";
import { WorkerLink } from "./net/worker_link.ts";
import type { Shards } from "./routes/shards.ts";
import {
  openRuntime,
  replaceKeys,
  type Runtime,
  type TlsMaterial,
  type WorkerKeys,
} from "./runtime.ts";
import type { StateView } from "./lib/cluster/state.ts";
import type { Readiness } from "./lib/cluster/sync.ts";
import { brokerHandler, type Listener, serve, stopServing } from "./serve.ts";
import type { BrokerHandler } from "./routes/app.ts";

/** What the supervisor sends a worker. */
export type ToWorker =
  | {
    t: "init";
    index: number;
    count: number;
    config: Config;
    /** The node's id, read once by the supervisor. */
    nodeId: string;
    /** The API keys, read once by the supervisor, and their limits' shared buckets. */
    keys: WorkerKeys;
    /** The certificate and key to serve HTTPS with, read once by the supervisor. */
    tls: TlsMaterial | undefined;
    figures: SharedArrayBuffer;
    /** A port to each other worker, by index (null at this worker's own). */
    peers: (MessagePort | null)[];
  }
  | { t: "listen"; port: number }
  /** Cluster mode: the node's state, after each change (ClusterState.mirror). */
  | { t: "cluster"; view: StateView }
  /** Cluster mode: the followers this shard's writes wait for (Replicator.useStandbys). */
  | { t: "standbys"; peers: string[]; generation: number; term: number }
  /** The API keys the supervisor read again (SIGHUP), and fresh buckets for their limits. */
  | { t: "keys"; keys: WorkerKeys }
  /** New certificates the supervisor read (SIGHUP): served from now on, no connection dropped. */
  | { t: "tls"; tls: TlsMaterial }
  | { t: "shutdown"; graceMs: number };

/** What a worker tells the supervisor. */
export type FromWorker =
  | { t: "opened"; topics: number; messages: number; records: number; durationMs: number }
  | { t: "listening"; port: number }
  | { t: "failed"; message: string }
  | { t: "stopped"; inFlightFinished: boolean }
  | { t: "keys-replaced" }
  | { t: "tls-replaced"; error?: string }
  /** Cluster mode: this shard's followers, for the node's chooser. */
  | { t: "sync"; report: Readiness }
  /** Cluster mode: whether this worker can write its WAL (the node campaigns only if all can). */
  | { t: "health"; healthy: boolean };

function tell(m: FromWorker): void {
  self.postMessage(m);
}

let rt: Runtime | undefined;
let handler: BrokerHandler | undefined;
let server: Listener | undefined;
let config: Config | undefined;
let log = new Logger("info");

self.onmessage = async (e: MessageEvent<ToWorker>) => {
  const m = e.data;
  try {
    if (m.t === "init") await init(m);
    else if (m.t === "listen") listen(m.port);
    else if (m.t === "cluster") rt!.broker.cluster!.mirror(m.view);
    else if (m.t === "standbys") {
      rt!.broker.replicator!.useStandbys(m.peers, m.generation, m.term);
    } else if (m.t === "tls") {
      // A pair that does not serve keeps the one in use: reported, not the end of the worker.
      try {
        server!.replaceTls(m.tls);
        tell({ t: "tls-replaced" });
      } catch (e) {
        tell({ t: "tls-replaced", error: (e as Error).message });
      }
    } else if (m.t === "keys") {
      replaceKeys(rt!, m.keys.list, m.keys.limits);
      tell({ t: "keys-replaced" });
    } else if (m.t === "shutdown") await shutdown(m.graceMs);
  } catch (err) {
    tell({ t: "failed", message: (err as Error).message });
  }
};

async function init(m: Extract<ToWorker, { t: "init" }>): Promise<void> {
  config = m.config;
  log = new Logger(config.logLevel);
  const shard = { index: m.index, count: m.count };
  const clustered = config.clusterEtcd.length > 0;
  rt = await openRuntime(
    config,
    log,
    { shard: { shard, figures: new SharedFigures(m.figures, shard) }, nodeId: m.nodeId },
    {
      keys: m.keys,
      tls: m.tls,
      report: clustered ? (report) => tell({ t: "sync", report }) : undefined,
    },
  );
  if (clustered) watchHealth(rt);
  const broker = rt.broker;
  const links = m.peers.map((port) => {
    if (!port) return null;
    // What another worker hands over counts for this one's idle collector as its own requests do.
    const done = <T>(p: Promise<T>) => p.finally(() => rt!.idle?.touch());
    const link: WorkerLink = new WorkerLink(
      port,
      (req) => done(handler!.forwarded(req)),
      (verb, args, signal) => done(answerer.answer(verb, args, signal)),
    );
    const answerer = new Answerer(broker, link);
    return link;
  });
  const shards: Shards = {
    self: m.index,
    count: m.count,
    ask: (to, method, url, headers, body) => links[to]!.ask(method, url, headers, body),
  };
  handler = brokerHandler(config, rt, log, shards, shardedBroker(broker, shard, links));
  const r = rt.broker.recovery;
  tell({
    t: "opened",
    topics: r.topics,
    messages: r.messages,
    records: r.records,
    durationMs: r.duration_ms,
  });
}

function listen(port: number): void {
  server = serve(config!, rt!, log, {
    handler: handler!,
    port,
    onListening: (bound) => {
      rt!.broker.member?.start(); // follows the leader's stream of this shard
      tell({ t: "listening", port: bound });
    },
  });
}

let healthTimer: ReturnType<typeof setInterval> | undefined;

/** Tells the supervisor when this worker's WALs stop (or start) being writable. */
function watchHealth(rt: Runtime): void {
  let was = true;
  healthTimer = setInterval(() => {
    const now = rt.broker.healthy;
    if (now !== was) tell({ t: "health", healthy: was = now });
  }, HEALTH_CHECK_MS);
}

/** How often a worker of a cluster node checks its WALs for the node's election. */
const HEALTH_CHECK_MS = 250;

async function shutdown(graceMs: number): Promise<void> {
  clearInterval(healthTimer);
  const { broker } = rt!;
  const left = broker.member?.close(); // stops following; the supervisor resigns for the node
  tell({ t: "stopped", inFlightFinished: await stopServing(broker, server, graceMs, left) });
}
