/**
 * @module Every limit and default in one place. Contract limits are constants; deployment
 * settings are read once by loadConfig() from the environment and flags into a Config.
 */

import { parseCidrList } from "./push/egress.ts";
import { formatDuration, parseDuration } from "./duration.ts";
import { closestName } from "../protocol/closest_name.ts";

/** Largest publish body; above it the broker answers 413. */
export const MAX_PAYLOAD_BYTES = 2 * 1024 * 1024;
/** Largest JSON body of the control endpoints (requeue carries a whole message). */
export const MAX_JSON_BODY_BYTES = 4 * 1024 * 1024;
/** Most messages one batch publish (POST /publish/{topic}/batch) carries. */
export const MAX_BATCH_MESSAGES = 1000;
/** Largest batch publish body: room for 1,000 Base64 messages of about 12 KiB each. */
export const MAX_BATCH_BODY_BYTES = 16 * 1024 * 1024;
/** How long an idempotency key suppresses duplicates. */
export const IDEMPOTENCY_WINDOW_MS = 5 * 60_000;
/** Retry count at which a message moves to `{topic}.dlq`. */
export const MAX_ATTEMPTS = 3;
/** Messages returned by the dashboard peek. */
export const MAX_PEEK = 10;
/**
 * Payload bytes one consume or peek answer carries at most (it always carries one message), so
 * an answer stays bounded whatever `limit` asks: at most ~6 MiB of JSON for 4 MiB of binary
 * payloads, ~30 MiB in the worst case of escaped text.
 */
export const MAX_ANSWER_PAYLOAD_BYTES = 4 * 1024 * 1024;
/** Largest `limit` of one consume. */
export const MAX_CONSUME_LIMIT = 1000;
/** Longest long-poll `timeout`. */
export const MAX_LONG_POLL_MS = 30_000;
/** Longest visibility lease a consumer may ask for. */
export const MAX_VISIBILITY_MS = 12 * 3_600_000;
/** Longest `delay`, `ttl` or `retain` (SQS allows 14 days of retention; so do we). */
export const MAX_TIME_MS = 14 * 24 * 3_600_000;
/** Suffix of a dead-letter topic. */
export const DLQ_SUFFIX = ".dlq";
/** Seconds a 429 or 503 asks the client to wait. */
export const RETRY_AFTER_SECONDS = 1;
/** Period of the `interval` fsync mode. */
export const FSYNC_INTERVAL_MS = 100;
/** Broker version reported by /healthz and User-Agent. */
export const VERSION = "0.1.0";

export type FsyncMode = "always" | "interval" | "never";
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Deployment settings; lib receives this and never reads the environment itself. */
export interface Config {
  port: number;
  host: string;
  /** Directory of the per-topic WAL files, or `:memory:` to run without disk. */
  dataDir: string;
  maxTopics: number;
  maxQueue: number;
  fsync: FsyncMode;
  visibilityMs: number;
  /** Raw `BROKER_API_KEYS` value; empty means auth is off. */
  apiKeys: string;
  /** Optional file of `key[:scope,scope]` lines, re-read on SIGHUP. */
  apiKeysFile: string;
  /** PEM certificate chain and private key files: with both, the broker serves HTTPS and WSS. */
  tlsCert: string;
  tlsKey: string;
  webhookRetryScheduleMs: number[];
  /** POSTs one webhook may have in flight at once. */
  webhookConcurrency: number;
  /** PEM file of a CA to trust for the other nodes' certificates (`https://` advertise URLs). */
  clusterCa: string;
  /** etcd over TLS: its CA, and the client certificate and key to present. */
  etcdCa: string;
  etcdCert: string;
  etcdKey: string;
  /** Address ranges webhooks may not reach (lib/push/egress.ts), comma-separated. */
  webhookDeny: string;
  /** When set, the only address ranges webhooks may reach. */
  webhookAllow: string;
  /** File of the key that seals webhook secrets; empty: `<data dir>/webhook.key`. */
  webhookKeyFile: string;
  /** Origins besides the broker's own whose browser pages may change state (routes/site_policy.ts). */
  allowedOrigins: string[];
  /** Host names besides loopback ones a request may name (`*`: any); checked on a loopback bind, or when set. */
  allowedHosts: string[];
  logLevel: LogLevel;
  accessLog: boolean;
  /** A WAL file is rewritten once it holds this many times more records than live state. */
  compactRatio: number;
  /** ...and at least this many bytes. */
  compactMinBytes: number;
  /** Bytes the broker may hold for messages (payload + overhead); past it, 429 memory_full. */
  maxMemoryBytes: number;
  /** Payloads this large or larger are read back from the WAL file, not kept in memory. */
  diskPayloadMinBytes: number;
  /** Bytes of recent durable payloads kept in memory; older ones are read from the WAL file. */
  payloadCacheBytes: number;
  /** Free bytes the data dir's file system keeps; below them publishes get 507 (0: no alarm). */
  diskFreeLimitBytes: number;
  /** Recent messages a streamed topic keeps for resume (SSE Last-Event-ID). */
  streamBuffer: number;
  /** Open WebSockets the broker holds at most, all workers together (docs/api/websocket.md). */
  wsMaxSockets: number;
  /** Open WebSockets one API key (or, with auth off, one client address) holds at most. */
  wsMaxSocketsPerKey: number;
  /** etcd endpoints; empty: standalone. */
  clusterEtcd: string[];
  /** The cluster's key prefix in etcd. */
  clusterName: string;
  /** How peers and clients reach this node; empty: `http://{host}:{port}`. */
  advertiseUrl: string;
  /** Voting nodes; a write needs floor(size/2)+1 of them to have it on disk. */
  clusterSize: number;
  /** Worker isolates, each owning the topics that hash to it (BROKER_WORKERS; 1: no workers). */
  workers: number;
  /** The leader's etcd lease, whole seconds in ms. */
  electionTtlMs: number;
}

interface Setting {
  env: string;
  flag: string;
  def: string;
  help: string;
  /** Why the flag is refused: the setting comes from the environment only. */
  envOnly?: string;
  apply(c: Config, v: string): void;
}

function int(name: string, v: string, min: number, max: number): number {
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${v}"`);
  }
  return Number(v);
}

function duration(name: string, v: string, min: number): number {
  let ms: number;
  try {
    ms = parseDuration(v, name);
  } catch {
    throw new Error(`${name} must be a duration like 30s or 250ms, got "${v}"`);
  }
  if (ms < min) throw new Error(`${name} must be at least ${formatDuration(min)}, got "${v}"`);
  return ms;
}

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  B: 1,
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
};

/** Bytes as `512MiB`, `4GiB` or a plain number above 0; undefined for anything else. */
export function byteSize(v: string): number | undefined {
  const m = /^(\d{1,15})(B|KiB|MiB|GiB|TiB)?$/.exec(v);
  if (!m || Number(m[1]) === 0) return undefined;
  return Number(m[1]) * SIZE_UNITS[m[2] ?? ""]!;
}

/** Bytes as `512MiB`, `4GiB`, a plain number, or `N%` of the machine's physical memory. */
function size(name: string, v: string): number {
  const pct = /^(\d{1,3})%$/.exec(v);
  if (pct && Number(pct[1]) >= 1 && Number(pct[1]) <= 100) {
    return Math.floor(Deno.systemMemoryInfo().total * Number(pct[1]) / 100);
  }
  const n = byteSize(v);
  if (n === undefined) {
    throw new Error(`${name} must be a size like 512MiB, 4GiB, 1048576 or 40%, got "${v}"`);
  }
  return n;
}

function oneOf<T extends string>(name: string, v: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(v)) {
    throw new Error(`${name} must be one of ${allowed.join(", ")}, got "${v}"`);
  }
  return v as T;
}

function bool(name: string, v: string): boolean {
  if (["true", "1"].includes(v)) return true;
  if (["false", "0", ""].includes(v)) return false;
  throw new Error(`${name} must be true or false, got "${v}"`);
}

/** The settings table: one row per setting, used by loadConfig() and `--help`. */
export const SETTINGS: readonly Setting[] = [
  {
    env: "PORT",
    flag: "--port",
    def: "7800",
    help: "listen port (0 picks a free one)",
    apply: (c, v) => c.port = int("PORT", v, 0, 65535),
  },
  {
    env: "BROKER_HOST",
    flag: "--host",
    def: "127.0.0.1",
    help: "listen address (0.0.0.0 to expose)",
    apply: (c, v) => {
      if (!/^[0-9A-Za-z.:\-\[\]]+$/.test(v)) {
        throw new Error(`BROKER_HOST is not an address: "${v}"`);
      }
      c.host = v;
    },
  },
  {
    env: "BROKER_DATA_DIR",
    flag: "--data-dir",
    def: "./data",
    help: "directory of the per-topic WAL files; :memory: runs without disk",
    apply: (c, v) => {
      if (v === "") throw new Error("BROKER_DATA_DIR must not be empty");
      c.dataDir = v;
    },
  },
  {
    env: "BROKER_MAX_TOPICS",
    flag: "--max-topics",
    def: "1000",
    help: "topic count limit (403 topic_limit_reached)",
    apply: (c, v) => c.maxTopics = int("BROKER_MAX_TOPICS", v, 1, 1_000_000),
  },
  {
    env: "BROKER_MAX_QUEUE",
    flag: "--max-queue",
    def: "100000",
    help: "messages held per topic before its policy applies (429 or drop-oldest)",
    apply: (c, v) => c.maxQueue = int("BROKER_MAX_QUEUE", v, 1, 100_000_000),
  },
  {
    env: "BROKER_FSYNC",
    flag: "--fsync",
    def: "always",
    help: "always: 2xx after fsync (group commit); interval: fsync every 100ms; never",
    apply: (c, v) => c.fsync = oneOf("BROKER_FSYNC", v, ["always", "interval", "never"] as const),
  },
  {
    env: "BROKER_VISIBILITY",
    flag: "--visibility",
    def: "30s",
    help: "lease of a delivered, un-acked message",
    apply: (c, v) => c.visibilityMs = duration("BROKER_VISIBILITY", v, 1),
  },
  {
    env: "BROKER_API_KEYS",
    flag: "--api-keys",
    def: "",
    help: "comma-separated API keys, scopes after a colon joined by + (k1,k2:publish+consume); " +
      "environment only: the flag is refused, as a key on the command line shows in ps",
    // On the command line a key shows in `ps` and in the log of whatever started the broker.
    envOnly: "--api-keys is refused: a key on the command line shows in ps and in the log of " +
      "what started the broker; set BROKER_API_KEYS in the environment, or list the keys in a " +
      "file named by --api-keys-file (docs/operating.md, API keys and scopes); a key given " +
      "this way may already be in that log: replace it",
    apply: (c, v) => c.apiKeys = v,
  },
  {
    env: "BROKER_API_KEYS_FILE",
    flag: "--api-keys-file",
    def: "",
    help: "file with one key[:scope,scope] per line, re-read on SIGHUP",
    apply: (c, v) => c.apiKeysFile = v,
  },
  {
    env: "BROKER_TLS_CERT",
    flag: "--tls-cert",
    def: "",
    help: "PEM certificate chain file; with --tls-key the broker serves HTTPS (re-read on SIGHUP)",
    apply: (c, v) => c.tlsCert = v,
  },
  {
    env: "BROKER_TLS_KEY",
    flag: "--tls-key",
    def: "",
    help: "PEM private key file of the --tls-cert certificate",
    apply: (c, v) => c.tlsKey = v,
  },
  {
    env: "BROKER_TLS_CLIENT_CA",
    flag: "--tls-client-ca",
    def: "",
    help: "not supported: Deno's TLS listener cannot verify client certificates (docs/security.md)",
    apply: (_c, v) => {
      if (v !== "") {
        throw new Error(
          "BROKER_TLS_CLIENT_CA: Deno's TLS listener can neither ask for nor verify client " +
            "certificates; terminate mutual TLS in a proxy in front (docs/security.md, Mutual TLS)",
        );
      }
    },
  },
  {
    env: "BROKER_WEBHOOK_RETRY_SCHEDULE",
    flag: "--webhook-retry-schedule",
    def: "5s,5m,30m",
    help: "waits before webhook retries 1..n",
    apply: (c, v) =>
      c.webhookRetryScheduleMs = v.split(",").map((d) =>
        duration("BROKER_WEBHOOK_RETRY_SCHEDULE", d.trim(), 1)
      ),
  },
  {
    env: "BROKER_WEBHOOK_CONCURRENCY",
    flag: "--webhook-concurrency",
    def: "4",
    help: "POSTs one webhook may have in flight at once (1 keeps publish order)",
    apply: (c, v) => c.webhookConcurrency = int("BROKER_WEBHOOK_CONCURRENCY", v, 1, 100),
  },
  {
    env: "BROKER_WEBHOOK_DENY",
    flag: "--webhook-deny",
    def: "",
    help: "address ranges webhooks may not reach (10.0.0.0/8,fd00::/8); loopback, link-local and " +
      "metadata addresses are refused anyway",
    apply: (c, v) => {
      parseCidrList(v, "BROKER_WEBHOOK_DENY");
      c.webhookDeny = v;
    },
  },
  {
    env: "BROKER_WEBHOOK_ALLOW",
    flag: "--webhook-allow",
    def: "",
    help: "when set, the only address ranges webhooks may reach (127.0.0.0/8,::1 opens loopback)",
    apply: (c, v) => {
      parseCidrList(v, "BROKER_WEBHOOK_ALLOW");
      c.webhookAllow = v;
    },
  },
  {
    env: "BROKER_WEBHOOK_KEY_FILE",
    flag: "--webhook-key-file",
    def: "",
    help: "file of the key (32 bytes, Base64) that seals webhook secrets at rest; default " +
      "<data dir>/webhook.key, made on first start; every node of a cluster needs the same key",
    apply: (c, v) => c.webhookKeyFile = v,
  },
  {
    env: "BROKER_ALLOWED_ORIGINS",
    flag: "--allowed-origins",
    def: "",
    help: "origins besides the broker's own whose pages may change state (https://ops.example.com)",
    apply: (c, v) => c.allowedOrigins = origins("BROKER_ALLOWED_ORIGINS", v),
  },
  {
    env: "BROKER_ALLOWED_HOSTS",
    flag: "--allowed-hosts",
    def: "",
    help: "host names a request may name besides localhost, 127.0.0.1 and [::1] (* for any)",
    apply: (c, v) => c.allowedHosts = hostNames("BROKER_ALLOWED_HOSTS", v),
  },
  {
    env: "BROKER_LOG_LEVEL",
    flag: "--log-level",
    def: "info",
    help: "debug, info, warn or error",
    apply: (c, v) =>
      c.logLevel = oneOf("BROKER_LOG_LEVEL", v, ["debug", "info", "warn", "error"] as const),
  },
  {
    env: "BROKER_ACCESS_LOG",
    flag: "--access-log",
    def: "false",
    help: "log one line per HTTP request",
    apply: (c, v) => c.accessLog = bool("BROKER_ACCESS_LOG", v),
  },
  {
    env: "BROKER_MAX_MEMORY",
    flag: "--max-memory",
    def: "40%",
    help: "memory the broker may hold for messages (512MiB, 4GiB, bytes, or % of physical memory)",
    apply: (c, v) => c.maxMemoryBytes = size("BROKER_MAX_MEMORY", v),
  },
  {
    env: "BROKER_DISK_PAYLOAD_MIN",
    flag: "--disk-payload-min",
    def: "64KiB",
    help: "payloads this large or larger are served from the WAL file, not kept in memory",
    apply: (c, v) => c.diskPayloadMinBytes = size("BROKER_DISK_PAYLOAD_MIN", v),
  },
  {
    env: "BROKER_PAYLOAD_CACHE",
    flag: "--payload-cache",
    def: "8MiB",
    help: "recent payloads kept in memory once durable; older ones are read from the WAL file",
    apply: (c, v) => c.payloadCacheBytes = size("BROKER_PAYLOAD_CACHE", v),
  },
  {
    env: "BROKER_DISK_FREE_LIMIT",
    flag: "--disk-free-limit",
    def: "256MiB",
    help: "free space the data directory's disk keeps; below it publishes get 507 disk_full " +
      "while consumers and acks go on (0: no alarm)",
    apply: (c, v) => {
      const n = v === "0" ? 0 : byteSize(v);
      if (n === undefined) {
        throw new Error(`BROKER_DISK_FREE_LIMIT must be a size like 512MiB, 1GiB or 0, got "${v}"`);
      }
      c.diskFreeLimitBytes = n;
    },
  },
  {
    env: "BROKER_STREAM_BUFFER",
    flag: "--stream-buffer",
    def: "1000",
    help: "recent messages a streamed topic keeps so a reconnecting reader can resume",
    apply: (c, v) => c.streamBuffer = int("BROKER_STREAM_BUFFER", v, 0, 1_000_000),
  },
  {
    env: "BROKER_WS_MAX_SOCKETS",
    flag: "--ws-max-sockets",
    def: "64",
    help: "open WebSockets the broker holds at most; each may make it buffer a 64 MiB message",
    apply: (c, v) => c.wsMaxSockets = int("BROKER_WS_MAX_SOCKETS", v, 1, 100_000),
  },
  {
    env: "BROKER_WS_MAX_SOCKETS_PER_KEY",
    flag: "--ws-max-sockets-per-key",
    def: "16",
    help: "open WebSockets one API key (with auth off, one client address) holds at most",
    apply: (c, v) => c.wsMaxSocketsPerKey = int("BROKER_WS_MAX_SOCKETS_PER_KEY", v, 1, 100_000),
  },
  {
    env: "BROKER_WORKERS",
    flag: "--workers",
    def: "1",
    help: "worker isolates serving the port together, each owning a share of the topics; " +
      "1 runs the broker in one isolate",
    apply: (c, v) => c.workers = int("BROKER_WORKERS", v, 1, 256),
  },
  {
    env: "BROKER_COMPACT_RATIO",
    flag: "--compact-ratio",
    def: "4",
    help: "rewrite a WAL file once it is this many times larger than its live records " +
      "(2 while those are at most 1 MiB)",
    apply: (c, v) => c.compactRatio = int("BROKER_COMPACT_RATIO", v, 2, 1000),
  },
  {
    env: "BROKER_COMPACT_MIN_BYTES",
    flag: "--compact-min-bytes",
    def: "131072",
    help: "never rewrite a WAL file smaller than this",
    apply: (c, v) => c.compactMinBytes = int("BROKER_COMPACT_MIN_BYTES", v, 0, 2 ** 40),
  },
  {
    env: "BROKER_CLUSTER_ETCD",
    flag: "--cluster-etcd",
    def: "",
    help: "comma-separated etcd endpoints (host:port or URL); empty = standalone",
    apply: (c, v) => c.clusterEtcd = endpoints("BROKER_CLUSTER_ETCD", v),
  },
  {
    env: "BROKER_CLUSTER_CA",
    flag: "--cluster-ca",
    def: "",
    help: "PEM file of a CA to trust for the other nodes' https:// certificates",
    apply: (c, v) => c.clusterCa = v,
  },
  {
    env: "BROKER_ETCD_CA",
    flag: "--etcd-ca",
    def: "",
    help: "PEM file of the CA that signed etcd's certificate (https:// endpoints)",
    apply: (c, v) => c.etcdCa = v,
  },
  {
    env: "BROKER_ETCD_CERT",
    flag: "--etcd-cert",
    def: "",
    help: "PEM client certificate to present to etcd (with --etcd-key)",
    apply: (c, v) => c.etcdCert = v,
  },
  {
    env: "BROKER_ETCD_KEY",
    flag: "--etcd-key",
    def: "",
    help: "PEM private key of the --etcd-cert certificate",
    apply: (c, v) => c.etcdKey = v,
  },
  {
    env: "BROKER_CLUSTER_NAME",
    flag: "--cluster-name",
    def: "ferry",
    help: "the cluster's key prefix in etcd",
    apply: (c, v) => {
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(v)) {
        throw new Error(`BROKER_CLUSTER_NAME must be 1-64 of A-Z a-z 0-9 . _ -, got "${v}"`);
      }
      c.clusterName = v;
    },
  },
  {
    env: "BROKER_ADVERTISE_URL",
    flag: "--advertise-url",
    def: "",
    help: "how peers and clients reach this node (default http://{host}:{port})",
    apply: (c, v) => {
      if (v && !/^https?:\/\/[^\s/?#]+$/.test(v)) {
        throw new Error(`BROKER_ADVERTISE_URL must be like http://10.0.0.5:7800, got "${v}"`);
      }
      c.advertiseUrl = v;
    },
  },
  {
    env: "BROKER_CLUSTER_SIZE",
    flag: "--cluster-size",
    def: "3",
    help: "voting nodes; a write needs floor(size/2)+1 of them to have it on disk",
    apply: (c, v) => c.clusterSize = int("BROKER_CLUSTER_SIZE", v, 1, 9),
  },
  {
    env: "BROKER_ELECTION_TTL",
    flag: "--election-ttl",
    def: "2s",
    help:
      "the leader's etcd lease, whole seconds; a dead leader is replaced within about this long",
    apply: (c, v) => {
      const ms = duration("BROKER_ELECTION_TTL", v, 1_000);
      if (ms % 1000 !== 0) {
        throw new Error(`BROKER_ELECTION_TTL must be whole seconds (etcd leases are), got "${v}"`);
      }
      c.electionTtlMs = ms;
    },
  },
];

/** Origins (`https://ops.example.com`, no path), comma-separated, as browsers send them. */
function origins(name: string, v: string): string[] {
  if (v.trim() === "") return [];
  return v.split(",").map((e) => {
    const t = e.trim();
    const url = URL.canParse(t) ? new URL(t) : undefined;
    if (
      !url || !/^https?:$/.test(url.protocol) || url.username || url.password ||
      !/^https?:\/\/[^/?#]+\/?$/.test(t)
    ) {
      throw new Error(`${name} must list origins like https://ops.example.com, got "${t}"`);
    }
    return url.origin;
  });
}

/** Host names or addresses without a port (`ferry.internal`, `[fd00::5]`), or `*`. */
function hostNames(name: string, v: string): string[] {
  if (v.trim() === "") return [];
  return v.split(",").map((e) => {
    const t = e.trim().toLowerCase();
    if (t !== "*" && !/^[0-9a-z._-]+$|^\[[0-9a-f:.]+\]$/.test(t)) {
      throw new Error(`${name} must list host names like ferry.internal (no port), got "${t}"`);
    }
    return t;
  });
}

/** etcd endpoints: `host:port` or `http(s)://host:port`, comma-separated. */
function endpoints(name: string, v: string): string[] {
  if (v.trim() === "") return [];
  return v.split(",").map((e) => {
    const t = e.trim();
    if (
      !/^(https?:\/\/)?[A-Za-z0-9.\-]+:\d{1,5}$|^(https?:\/\/)?\[[0-9A-Fa-f:.]+\]:\d{1,5}$/.test(t)
    ) {
      throw new Error(`${name} must list endpoints like 127.0.0.1:2379, got "${t}"`);
    }
    return t;
  });
}

/** A Config with every default, for tests and embedders. */
export function defaultConfig(overrides: Partial<Config> = {}): Config {
  const c = {} as Config;
  for (const s of SETTINGS) s.apply(c, s.def);
  return { ...c, ...overrides };
}

/** Thrown for a bad setting; main prints its message as one line and exits 2. */
export class ConfigError extends Error {}

/** The `--help` text: every setting, its flag and its default. */
export function helpText(): string {
  const rows = SETTINGS.map((s) =>
    `  ${(s.flag + " <v>").padEnd(32)} ${s.env.padEnd(30)} default ${
      JSON.stringify(s.def)
    }\n      ${s.help}`
  );
  return `ferry-server: an HTTP message broker\n\nUsage: deno task start [flags]\n\n` +
    `Every setting is a flag or an environment variable; flags win.\n\n${rows.join("\n")}\n` +
    `  --help                           print this text\n`;
}

/**
 * The variable in which the launcher (tools/start.sh) passes the names of the `BROKER_*`
 * variables set: a broker allowed to read only `PORT` and `BROKER_*` cannot list them itself.
 */
export const ENV_NAMES_VARIABLE = "BROKER_ENV_NAMES";

/**
 * Reads settings from the environment, then flags (`--port 7801` or `--port=7801`). A `BROKER_*`
 * variable that is no setting is refused, as an unknown flag is: a misspelt name must not leave
 * its setting at the default without a word.
 */
export function loadConfig(env: Record<string, string | undefined>, args: string[] = []): Config {
  const c = defaultConfig();
  const byFlag = new Map(SETTINGS.map((s) => [s.flag, s]));
  try {
    for (const name of Object.keys(env)) {
      if (env[name] !== undefined) refuseUnknownVariable(name);
    }
    for (const s of SETTINGS) {
      const v = env[s.env];
      if (v !== undefined) s.apply(c, v);
    }
    for (let i = 0; i < args.length; i++) {
      const arg = args[i]!;
      const eq = arg.indexOf("=");
      const flag = eq >= 0 ? arg.slice(0, eq) : arg;
      const s = byFlag.get(flag);
      if (!s) {
        const near = closestName(flag, byFlag.keys());
        throw new Error(
          `unknown flag "${flag}" (${near ? `did you mean ${near}?` : "see --help"})`,
        );
      }
      if (s.envOnly) throw new Error(s.envOnly);
      const v = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (v === undefined) throw new Error(`flag ${flag} needs a value`);
      applyFlag(s, c, v);
    }
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  return c;
}

/** Throws for a `BROKER_*` name that is neither a setting nor the launcher's list of names. */
function refuseUnknownVariable(name: string): void {
  if (!name.startsWith("BROKER_") || name === ENV_NAMES_VARIABLE) return;
  const names = SETTINGS.map((s) => s.env);
  if (names.includes(name)) return;
  const near = closestName(name, names);
  if (near) throw new Error(`unknown setting ${name} (did you mean ${near}?)`);
  const known = names.filter((n) => n.startsWith("BROKER_")).join(", ");
  throw new Error(`unknown setting ${name}; the BROKER_* settings are ${known} (see --help)`);
}

/** Applies a flag's value; a refusal names the flag given, not its variable. */
function applyFlag(s: Setting, c: Config, v: string): void {
  try {
    s.apply(c, v);
  } catch (e) {
    const message = (e as Error).message.replace(new RegExp(`\\b${s.env}\\b`, "g"), s.flag);
    throw new Error(message);
  }
}
