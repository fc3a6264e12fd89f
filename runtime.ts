/**
 * The broker and what production wires around it: API keys, metrics, and the handler's hooks.
 * main.ts runs it; tests build their brokers with it too, so they get production's wiring.
 */

import {
  type ApiKey,
  checkNames,
  KeyRing,
  parseKeyFile,
  parseKeyList,
  SCOPE_BITS,
} from "./lib/auth.ts";
import { Broker, type OpenOptions } from "./lib/broker.ts";
import { type Config, ConfigError } from "./lib/config.ts";
import type { Logger } from "./lib/log.ts";
import { Metrics } from "./routes/metrics.ts";
import type { AppOptions } from "./routes/app.ts";
import { authHook } from "./routes/auth.ts";
import { sitePolicy } from "./routes/site_policy.ts";
import { metricsHook } from "./routes/ops.ts";
import { auditHook } from "./routes/audit.ts";
import { clusterHook } from "./routes/cluster.ts";
import { ClusterMember } from "./lib/cluster/member.ts";
import { ClusterState, epochClock } from "./lib/cluster/state.ts";
import { Election } from "./lib/cluster/election.ts";
import { type ChooserOptions, type Readiness, SyncChooser } from "./lib/cluster/sync.ts";
import { Etcd } from "./net/etcd.ts";
import { ReplicaClient } from "./net/leader_link.ts";
import { fetchSender, type Resolve } from "./net/webhook_sender.ts";
import { EgressPolicy } from "./lib/push/egress.ts";
import { exposedGc, IdleGc } from "./lib/memory/idle_gc.ts";
import { RateLimiter } from "./lib/rate_limit.ts";
import { OpenStreams } from "./lib/open_streams.ts";

/** The broker and what production wires around it; tests get the same from startBroker(). */
export interface Runtime {
  broker: Broker;
  metrics: Metrics;
  /** The API keys; SIGHUP replaces them (`replaceKeys`). */
  keys: KeyRing;
  /** The keys' publish limits. */
  limiter: RateLimiter;
  /** The SSE streams and WebSockets open under a key; `replaceKeys` ends the revoked ones. */
  streams: OpenStreams;
  /** The certificate and key the broker serves HTTPS with; undefined: plain HTTP. */
  tls: TlsMaterial | undefined;
  /**
   * Collects once the requests stop after a burst; told of every finished request, this worker's
   * own and those other workers hand over. Undefined without V8's `--expose-gc`.
   */
  idle?: IdleGc;
}

/**
 * Installs a new key list and its limits (SIGHUP); a worker gets the shared buckets too. Then
 * ends the open SSE streams and WebSockets whose key is gone or lost its route's scope.
 */
export function replaceKeys(
  rt: Pick<Runtime, "keys" | "limiter" | "streams">,
  keys: ApiKey[],
  limits?: SharedArrayBuffer,
): void {
  rt.keys.replace(keys);
  rt.limiter.replace(rt.keys.keys, limits);
  rt.streams.revoke(rt.keys.keys);
}

/** Auth is on when either key setting is set; a keys file with no keys then refuses everyone. */
export function authEnabled(config: Config): boolean {
  return config.apiKeys !== "" || config.apiKeysFile !== "";
}

/** The text of the file a setting names; a ConfigError naming the setting if it cannot be read. */
async function settingFile(setting: string, path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    throw new ConfigError(`${setting}: cannot read "${path}": ${(e as Error).message}`);
  }
}

/** The keys of BROKER_API_KEYS and the keys file; a ConfigError names the setting, never a key. */
export async function readKeys(config: Config): Promise<ApiKey[]> {
  const keys = parseKeyList(config.apiKeys);
  if (config.apiKeysFile) {
    keys.push(...parseKeyFile(await settingFile("BROKER_API_KEYS_FILE", config.apiKeysFile)));
  }
  checkNames(keys);
  return keys;
}

/** A certificate chain and its private key, in PEM, as Deno.serve takes them. */
export interface TlsMaterial {
  cert: string;
  key: string;
}

/**
 * The certificate and key of BROKER_TLS_CERT and BROKER_TLS_KEY, or undefined when neither is
 * set. A ConfigError names the setting: one set without the other, a file that cannot be read,
 * no certificate or no key in it, or a key that is not the certificate's. The pair is tried on a
 * loopback listener of its own, so what Deno.serve would refuse is caught here.
 */
export async function readTls(config: Config): Promise<TlsMaterial | undefined> {
  const { tlsCert, tlsKey } = config;
  if (!tlsCert && !tlsKey) return undefined;
  if (!tlsCert || !tlsKey) {
    throw new ConfigError("BROKER_TLS_CERT and BROKER_TLS_KEY go together: set both, or neither");
  }
  const tls = {
    cert: await settingFile("BROKER_TLS_CERT", tlsCert),
    key: await settingFile("BROKER_TLS_KEY", tlsKey),
  };
  try {
    Deno.listenTls({ hostname: "127.0.0.1", port: 0, ...tls }).close();
  } catch (e) {
    const why = (e as Error).message;
    const setting = /certificate/i.test(why)
      ? `BROKER_TLS_CERT "${tlsCert}"`
      : /mismatch|consistent/i.test(why)
      ? "BROKER_TLS_CERT and BROKER_TLS_KEY"
      : /key/i.test(why)
      ? `BROKER_TLS_KEY "${tlsKey}"`
      : "BROKER_TLS_CERT and BROKER_TLS_KEY";
    throw new ConfigError(`${setting}: not a usable PEM certificate and key: ${why}`);
  }
  return tls;
}

/** The HTTP clients of a cluster's links, where TLS settings ask for one of their own. */
export interface ClusterClients {
  /** To the other nodes (the replication WebSocket): trusts BROKER_CLUSTER_CA. */
  peers?: Deno.HttpClient;
  /** To etcd: trusts BROKER_ETCD_CA, presents BROKER_ETCD_CERT and BROKER_ETCD_KEY. */
  etcd?: Deno.HttpClient;
}

/**
 * The clients BROKER_CLUSTER_CA and BROKER_ETCD_* ask for (none in standalone mode); a
 * ConfigError names the setting whose file cannot be read or used.
 */
export async function clusterClients(config: Config): Promise<ClusterClients> {
  if (config.clusterEtcd.length === 0) return {};
  const read = (setting: string, path: string) =>
    path ? settingFile(setting, path) : Promise.resolve(undefined);
  const client = (settings: string, opts: Deno.CreateHttpClientOptions & Partial<TlsMaterial>) => {
    try {
      return Deno.createHttpClient(opts as Deno.CreateHttpClientOptions);
    } catch (e) {
      throw new ConfigError(`${settings}: not usable PEM: ${(e as Error).message}`);
    }
  };
  const out: ClusterClients = {};
  const peerCa = await read("BROKER_CLUSTER_CA", config.clusterCa);
  if (peerCa) out.peers = client("BROKER_CLUSTER_CA", { caCerts: [peerCa] });
  const ca = await read("BROKER_ETCD_CA", config.etcdCa);
  const cert = await read("BROKER_ETCD_CERT", config.etcdCert);
  const key = await read("BROKER_ETCD_KEY", config.etcdKey);
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError("BROKER_ETCD_CERT and BROKER_ETCD_KEY go together: set both, or neither");
  }
  if (ca || cert) {
    out.etcd = client("BROKER_ETCD_CA, BROKER_ETCD_CERT and BROKER_ETCD_KEY", {
      caCerts: ca ? [ca] : undefined,
      ...(cert && key ? { cert, key } : {}),
    });
  }
  return out;
}

/**
 * SIGHUP's first half: reads the keys again and hands them to `install`; a bad file keeps the
 * keys in use. Logs the outcome (the number of distinct keys, never a key) and its audit line.
 */
export async function reloadKeys(
  config: Config,
  log: Logger,
  install: (keys: ApiKey[]) => Promise<void> | void,
): Promise<void> {
  let keys: ApiKey[];
  try {
    keys = await readKeys(config);
  } catch (e) {
    const error = (e as Error).message;
    log.error("api keys not reloaded; the previous keys stay in use", { error });
    log.audit({ action: "keys.reload", key: null, via: "SIGHUP", status: "refused" });
    return;
  }
  await install(keys);
  log.info("api keys reloaded", { keys: new KeyRing(keys).size, file: config.apiKeysFile });
  log.audit({ action: "keys.reload", key: null, via: "SIGHUP", status: "ok" });
}

/**
 * SIGHUP's second half: reads the certificate and key again and hands them to `replace` (each
 * listener's `replaceTls`); a bad pair keeps the ones in use. Logs the outcome and its audit line.
 */
export async function reloadTls(
  config: Config,
  log: Logger,
  replace: (tls: TlsMaterial) => Promise<void> | void,
): Promise<void> {
  if (!config.tlsCert) return;
  try {
    await replace((await readTls(config))!);
  } catch (e) {
    log.error("tls certificate not reloaded; the previous one stays in use", {
      error: (e as Error).message,
    });
    log.audit({ action: "tls.reload", key: null, via: "SIGHUP", status: "refused" });
    return;
  }
  log.info("tls certificate reloaded", { cert: config.tlsCert });
  log.audit({ action: "tls.reload", key: null, via: "SIGHUP", status: "ok" });
}

/**
 * What keeps this process from the paths the settings name, as Deno's permissions stand (the
 * data dir to read and write, the keys file to read): one line naming the setting and the fix,
 * or undefined when nothing does. `deno task start` grants both (tools/start.sh).
 */
export function permissionProblem(config: Config): string | undefined {
  const denied = (name: "read" | "write", path: string) =>
    Deno.permissions.querySync({ name, path }).state !== "granted";
  const dir = config.dataDir;
  if (dir !== ":memory:") {
    const verb = denied("read", dir) ? "read" : denied("write", dir) ? "write" : undefined;
    if (verb) {
      return `cannot ${verb} BROKER_DATA_DIR "${dir}": permission denied by Deno; run with ` +
        `deno task start, or add --allow-read=${dir} --allow-write=${dir}`;
    }
  }
  for (
    const [setting, path] of [
      ["BROKER_API_KEYS_FILE", config.apiKeysFile],
      ["BROKER_WEBHOOK_KEY_FILE", config.webhookKeyFile],
      ["BROKER_TLS_CERT", config.tlsCert],
      ["BROKER_TLS_KEY", config.tlsKey],
      ["BROKER_CLUSTER_CA", config.clusterCa],
      ["BROKER_ETCD_CA", config.etcdCa],
      ["BROKER_ETCD_CERT", config.etcdCert],
      ["BROKER_ETCD_KEY", config.etcdKey],
    ]
  ) {
    if (path && denied("read", path)) {
      return `cannot read ${setting} "${path}": permission denied by Deno; run with ` +
        `deno task start, or add --allow-read=${path}`;
    }
  }
  return undefined;
}

/** What a worker of several is given by its supervisor, rather than reading or making. */
export interface FromSupervisor {
  /** The keys as the supervisor read them, and their limits' buckets, shared by every worker. */
  keys: WorkerKeys;
  /** Its shard reports its followers here (cluster mode). */
  report?: (r: Readiness) => void;
  /** The certificate and key, read once by the supervisor. */
  tls: TlsMaterial | undefined;
}

/** Keys as they reach a worker: the list, and the buckets `RateLimiter.buffer` made of it. */
export interface WorkerKeys {
  list: ApiKey[];
  limits: SharedArrayBuffer;
}

/** The keys a supervisor hands its workers (start-up, SIGHUP). */
export function workerKeys(list: ApiKey[]): WorkerKeys {
  return { list, limits: RateLimiter.buffer(new KeyRing(list).keys) as SharedArrayBuffer };
}

/**
 * Reads the keys, opens the broker (replaying its WALs) and attaches the metrics. `resolve`
 * gives webhook hosts' addresses instead of DNS (tests).
 */
export async function openRuntime(
  config: Config,
  log: Logger,
  { resolve, ...open }: Pick<OpenOptions, "clock" | "shard" | "nodeId"> & { resolve?: Resolve } =
    {},
  given: Partial<FromSupervisor> = {},
): Promise<Runtime> {
  const keys = new KeyRing(given.keys?.list ?? await readKeys(config));
  const tls = "tls" in given ? given.tls : await readTls(config);
  const clients = await clusterClients(config);
  const limiter = new RateLimiter();
  limiter.replace(keys.keys, given.keys?.limits);
  const report = given.report;
  const metrics = new Metrics();
  const broker = await Broker.open(config, {
    ...open,
    log,
    onFsync: metrics.observeFsync,
    ...fetchSender({
      policy: new EgressPolicy(config.webhookDeny, config.webhookAllow),
      resolve,
    }),
    onWebhookPost: metrics.observeWebhook,
    joinCluster: config.clusterEtcd.length > 0
      ? (b) => joinCluster(config, b, log, report, clients)
      : undefined,
  });
  metrics.attach(broker);
  const streams = new OpenStreams();
  return { broker, metrics, keys, limiter, streams, tls, idle: idleGc(broker, log) };
}

function idleGc(broker: Broker, log: Logger): IdleGc | undefined {
  const collect = exposedGc();
  if (!collect) return undefined;
  return new IdleGc({
    collect,
    held: () => broker.memory.held,
    onIdle: (collected, used, pauseMs) => {
      if (!collected) return;
      log.debug("heap collected once idle", {
        used_bytes: used,
        pause_ms: Math.round(pauseMs * 10) / 10,
      });
    },
  });
}

/**
 * A broker's part in its cluster (cluster mode: BROKER_CLUSTER_ETCD set), with the network
 * clients it dials: etcd for the election, the leader link for the stream. It takes part once
 * `start()`ed, after listening; until a leader is elected the node answers 503 `electing`.
 * A worker of several (`report` given) has no election: its supervisor's (`nodeElection`).
 */
export function joinCluster(
  config: Config,
  broker: Broker,
  log: Logger,
  report?: (r: Readiness) => void,
  clients: ClusterClients = {},
): ClusterMember {
  // A follower presents the first admin key written plain (a sha256: entry holds no key).
  const adminKey = parseKeyList(config.apiKeys).find((k) =>
    k.key !== undefined && (k.scopes & SCOPE_BITS.admin) !== 0
  );
  return new ClusterMember({
    nodeId: broker.nodeId,
    url: nodeUrl(config, config.host, config.port),
    size: config.clusterSize,
    name: config.clusterName,
    ttlSeconds: config.electionTtlMs / 1000,
    log,
    role: report ? { report } : {
      coordination: etcdOf(config, clients.etcd),
      healthy: () => broker.healthy,
    },
    followLeader: (state) => new ReplicaClient(broker, state, log, adminKey?.key, clients.peers),
    describe: { etcd: config.clusterEtcd, name: config.clusterName },
  });
}

/**
 * Where the other nodes and clients reach this node: BROKER_ADVERTISE_URL, else the address it
 * listens on, `https` when it serves TLS.
 */
export function nodeUrl(config: Config, hostname: string, port: number): string {
  return config.advertiseUrl || `${config.tlsCert ? "https" : "http"}://${hostname}:${port}`;
}

/** The election store of BROKER_CLUSTER_ETCD. */
function etcdOf(config: Config, client?: Deno.HttpClient): Etcd {
  return new Etcd(config.clusterEtcd, Math.min(1_000, config.electionTtlMs / 3), client);
}

/**
 * The election of a node of several workers, held by its supervisor: one campaign for the node,
 * on the same clock the workers' mirrors use, with the chooser of synchronous followers over
 * every worker's shard. `healthy` is false while any worker cannot write its WAL.
 */
export function nodeElection(
  config: Config,
  nodeId: string,
  url: string,
  log: Logger,
  o: Pick<ChooserOptions, "shards" | "apply"> & {
    healthy: () => boolean;
    etcdClient?: Deno.HttpClient;
  },
): { state: ClusterState; election: Election; chooser: SyncChooser } {
  const state = new ClusterState(nodeId, url, log, epochClock);
  const election = new Election({
    etcd: etcdOf(config, o.etcdClient),
    name: config.clusterName,
    ttlSeconds: config.electionTtlMs / 1000,
    state,
    log,
    healthy: o.healthy,
  });
  const chooser = new SyncChooser({
    shards: o.shards,
    needed: Math.floor(config.clusterSize / 2),
    setSync: (peers) => election.setSync([state.id, ...peers]),
    apply: o.apply,
  });
  return { state, election, chooser };
}

/** The handler's hooks for this configuration: API keys, metrics, the access log. */
export function appOptions(config: Config, log: Logger, rt: Runtime): AppOptions {
  const opts: AppOptions = {
    log,
    metrics: rt.metrics,
    streams: rt.streams,
    before: [],
    after: [metricsHook(rt.metrics)],
    site: sitePolicy(config),
  };
  const idle = rt.idle;
  if (idle) opts.after!.push(() => idle.touch());
  if (rt.broker.cluster) opts.before!.push(clusterHook(rt.broker.cluster));
  if (authEnabled(config)) {
    opts.before!.push(authHook(rt.keys, {
      admit: (key, messages, bytes) => rt.limiter.admit(key, messages, bytes),
      take: (key, messages, bytes) => rt.limiter.take(key, messages, bytes),
      refused: rt.metrics.rateLimited,
    }));
  }
  opts.after!.push(auditHook(log));
  if (config.accessLog) {
    opts.after!.push((req, route, res, seconds, requestId) => {
      log.info("request", {
        request_id: requestId,
        method: req.method,
        route: route?.pattern ?? "unmatched",
        status: res.status,
        duration_ms: Math.round(seconds * 100_000) / 100,
      });
    });
  }
  return opts;
}
