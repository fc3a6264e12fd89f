/**
 * The process when BROKER_WORKERS is more than 1 (docs/architecture.md "Workers"): it holds the
 * data directory's lock, starts the workers (worker.ts) with a link between every two of them,
 * has them recover their topics in parallel, then listen on one port (the first picks it when
 * PORT is 0, the others share it), and logs one "listening" line for all. A worker that fails
 * takes the process down (exit 1) so the supervisor above restarts a whole broker, not one with
 * holes. SIGTERM and SIGINT drain every worker and exit 0; SIGHUP reloads every worker's keys.
 * In a cluster it campaigns for the node (runtime.ts `nodeElection`): each worker mirrors its
 * state and follows or leads with its own shard, and it names the node's synchronous followers
 * from every shard's reports.
 */

import type { Config } from "./lib/config.ts";
import type { Logger } from "./lib/log.ts";
import { loadNodeId } from "./lib/node_id.ts";
import { SharedFigures } from "./lib/shard.ts";
import { DataDirLock } from "./lib/storage/data_dir_lock.ts";
import {
  clusterClients,
  nodeElection,
  nodeUrl,
  readKeys,
  readTls,
  reloadKeys,
  reloadTls,
  workerKeys,
} from "./runtime.ts";
import { egressFields, listeningFields, SHUTDOWN_GRACE_MS } from "./serve.ts";
import type { FromWorker, ToWorker } from "./worker.ts";

/** One line on stderr and exit 1: the broker cannot run. */
function fail(line: string): never {
  console.error(`ferry: ${line}`);
  Deno.exit(1);
}

/** A started worker, and the next message of each kind it sends. */
class Handle {
  readonly #waiting = new Map<string, (m: FromWorker) => void>();
  readonly #handlers = new Map<string, (m: FromWorker) => void>();

  constructor(readonly index: number, readonly worker: Worker, log: Logger) {
    worker.onmessage = (e: MessageEvent<FromWorker>) => {
      const m = e.data;
      if (m.t === "failed") fail(m.message);
      this.#handlers.get(m.t)?.(m);
      this.#waiting.get(m.t)?.(m);
      this.#waiting.delete(m.t);
    };
    worker.onerror = (e) => {
      e.preventDefault();
      log.error("worker failed; stopping the broker", { worker: index, error: e.message });
      fail(`worker ${index} failed: ${e.message}`);
    };
  }

  send(m: ToWorker, transfer: Transferable[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  /** Calls `fn` with every message of kind `t`. */
  on<T extends FromWorker["t"]>(t: T, fn: (m: Extract<FromWorker, { t: T }>) => void): void {
    this.#handlers.set(t, fn as (m: FromWorker) => void);
  }

  /** The next message of kind `t`. */
  next<T extends FromWorker["t"]>(t: T): Promise<Extract<FromWorker, { t: T }>> {
    return new Promise((resolve) => {
      this.#waiting.set(t, resolve as (m: FromWorker) => void);
    });
  }
}

/** Runs the broker as `config.workers` workers until a signal; never returns. */
export async function supervise(config: Config, log: Logger): Promise<never> {
  const count = config.workers;
  const lock = config.dataDir === ":memory:"
    ? undefined
    : await DataDirLock.acquire(config.dataDir, log);
  const nodeId = await loadNodeId(config.dataDir); // read once, for every worker
  const keys = workerKeys(await readKeys(config)); // read once too: one layout of the buckets
  const tls = await readTls(config);
  const figures = SharedFigures.buffer(count);
  const peers: (MessagePort | null)[][] = Array.from({ length: count }, () => []);
  for (let i = 0; i < count; i++) {
    for (let j = i + 1; j < count; j++) {
      const channel = new MessageChannel();
      peers[i]![j] = channel.port1;
      peers[j]![i] = channel.port2;
    }
    peers[i]![i] = null;
  }
  const t0 = performance.now();
  const workers = Array.from({ length: count }, (_, index) => {
    const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
    return new Handle(index, worker, log);
  });
  const opened = workers.map((w) => w.next("opened"));
  for (const w of workers) {
    const ports = peers[w.index]!;
    w.send(
      { t: "init", index: w.index, count, config, nodeId, keys, tls, figures, peers: ports },
      ports.filter((p): p is MessagePort => p !== null),
    );
  }
  const recovered = await Promise.all(opened);
  const recovery = {
    topics: recovered.reduce((n, r) => n + r.topics, 0),
    messages: recovered.reduce((n, r) => n + r.messages, 0),
    records: recovered.reduce((n, r) => n + r.records, 0),
    duration_ms: Math.round(performance.now() - t0),
  };
  log.info("recovered", { data_dir: config.dataDir, workers: count, ...recovery });

  // The first worker binds (picking a port when PORT is 0); the others share its port.
  const first = workers[0]!.next("listening");
  workers[0]!.send({ t: "listen", port: config.port });
  const { port } = await first;
  const rest = workers.slice(1).map((w) => {
    const listening = w.next("listening");
    w.send({ t: "listen", port });
    return listening;
  });
  await Promise.all(rest);
  const node = config.clusterEtcd.length > 0
    ? joinAsNode(
      config,
      nodeId,
      nodeUrl(config, config.host, port),
      workers,
      log,
      (await clusterClients(config)).etcd,
    )
    : undefined;

  let stopping: Promise<never> | undefined;
  const shutDown = async (signal: string): Promise<never> => {
    const t = performance.now();
    log.info("shutting down", { signal });
    const resigned = node?.election.close(); // the others elect a new leader at once
    const stopped = workers.map((w) => {
      const s = w.next("stopped");
      w.send({ t: "shutdown", graceMs: SHUTDOWN_GRACE_MS });
      return s;
    });
    const done = await Promise.all(stopped);
    await resigned;
    node?.chooser.close();
    await lock?.release();
    log.info("stopped", {
      signal,
      in_flight_finished: done.every((d) => d.inFlightFinished),
      duration_ms: Math.round(performance.now() - t),
    });
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => stopping ??= shutDown("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stopping ??= shutDown("SIGINT"));
  // SIGHUP: the keys are read once here and handed to every worker; a bad file keeps the old.
  Deno.addSignalListener("SIGHUP", () => {
    reloadKeys(config, log, async (list) => {
      const fresh = workerKeys(list); // one set of buckets for every worker
      await Promise.all(workers.map((w) => {
        const replaced = w.next("keys-replaced");
        w.send({ t: "keys", keys: fresh });
        return replaced;
      }));
    });
  });
  Deno.addSignalListener("SIGHUP", () => {
    reloadTls(config, log, async (tls) => {
      const answers = await Promise.all(workers.map((w) => {
        const replaced = w.next("tls-replaced");
        w.send({ t: "tls", tls });
        return replaced;
      }));
      const failed = answers.find((a) => a.error);
      if (failed) throw new Error(failed.error);
    });
  });

  log.info("webhook egress", egressFields(config));
  log.info("listening", {
    ...listeningFields(config, config.host, port, recovery),
    workers: count,
  });
  return await new Promise<never>(() => {}); // the signal handlers end the process
}

/**
 * The node's part in its cluster: one election for all workers, whose state every worker
 * mirrors after each change, and the chooser of synchronous followers over their shards.
 */
function joinAsNode(
  config: Config,
  nodeId: string,
  url: string,
  workers: Handle[],
  log: Logger,
  etcdClient: Deno.HttpClient | undefined,
) {
  const unhealthy = new Set<number>();
  const node = nodeElection(config, nodeId, url, log, {
    etcdClient,
    shards: workers.length,
    healthy: () => unhealthy.size === 0,
    apply: (i, peers, generation, term) =>
      workers[i]!.send({ t: "standbys", peers, generation, term }),
  });
  for (const w of workers) {
    w.on("sync", (m) => node.chooser.report(w.index, m.report));
    w.on("health", (m) => m.healthy ? unhealthy.delete(w.index) : unhealthy.add(w.index));
  }
  const mirror = () => {
    const view = node.state.view();
    for (const w of workers) w.send({ t: "cluster", view });
  };
  node.state.onUpdate(mirror);
  mirror();
  log.info("cluster: joining", {
    node_id: nodeId,
    url,
    etcd: config.clusterEtcd,
    name: config.clusterName,
    workers: workers.length,
  });
  node.election.start();
  return node;
}
