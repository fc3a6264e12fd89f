/**
 * Prometheus metrics (prefix `ferry_`) on a prom-client Registry, for GET /metrics. Nothing here
 * runs on the publish path: message counters and queue gauges are read from the broker's stats
 * projection (lib/stats.ts) once per scrape, and HTTP requests and fsyncs land in plain bucket
 * arrays that a scrape turns into histograms. Handlers reach it through their Ctx.
 */

import type { MetricsSource, TopicCounters, TopicFigures } from "../lib/api.ts";
import type { Metric, Registry } from "prom-client";

/** Upper bounds, in seconds, of ferry_http_request_duration_seconds; long-polls reach 30 s. */
export const HTTP_BUCKETS_S = [
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
];
/** Upper bounds, in seconds, of ferry_wal_fsync_seconds. */
export const FSYNC_BUCKETS_S = [
  0.0001,
  0.00025,
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
];
/** Upper bounds of ferry_publish_batch_messages (messages per batch publish). */
export const BATCH_BUCKETS = [1, 10, 50, 100, 250, 500, 1000];
/** Route label of requests that matched no route (404, 405): never the raw path. */
export const UNMATCHED = "unmatched";

/** A histogram kept as plain counts: observing is a short loop and three additions. */
export class Buckets {
  /** Observations per bucket, not cumulative; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && seconds > b[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** Requests of one route: answers per status code and their durations. */
interface RouteStats {
  codes: Map<number, number>;
  durations: Buckets;
}

const MESSAGE_COUNTERS: [keyof TopicCounters, string, string][] = [
  ["published", "published", "Messages stored by publish (broadcasts are not stored)"],
  ["delivered", "delivered", "Messages handed to consumers (peeks excluded)"],
  ["acked", "acked", "Messages acknowledged"],
  ["requeued", "requeued", "Messages put back by requeue or an ended lease"],
  ["deadLettered", "dead_lettered", "Messages moved to the topic's .dlq"],
  ["expired", "expired", "Messages dropped by their TTL"],
];

type PromClient = typeof import("prom-client");

/**
 * prom-client, imported on the first scrape: importing it (CommonJS, with its dependencies)
 * took 230-310 ms, most of an empty broker's start-up (measured), for a registry that only
 * matters once something scrapes.
 */
let promClient: Promise<PromClient> | undefined;

/** The broker's metrics registry, and the plain aggregates the HTTP layer and WAL feed. */
export class Metrics {
  /** Every metric, registered on the first scrape (`render()`). */
  registry: Registry | undefined;
  #registering: Promise<Registry> | undefined;
  /** prom-client's `Registry.PROMETHEUS_CONTENT_TYPE`. */
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";
  readonly fsync = new Buckets(FSYNC_BUCKETS_S);
  /** Messages per batch publish request. */
  readonly batch = new Buckets(BATCH_BUCKETS);
  readonly #routes = new Map<string, RouteStats>();
  /** Webhook POST durations per topic. */
  readonly #webhooks = new Map<string, Buckets>();
  /** Publishes refused for a key's limits, by key name. */
  readonly #rateLimited = new Map<string, number>();
  #broker: MetricsSource | undefined;
  /** The stats projection of the scrape under way, taken once in render(). */
  #figures: TopicFigures[] = [];

  /** `process: true` adds prom-client's process metrics (CPU, memory, file descriptors). */
  constructor(private readonly opts: { process?: boolean } = {}) {}

  /** The registry, with every metric registered the first time. */
  #registryNow(): Promise<Registry> {
    this.#registering ??= (promClient ??= import("prom-client")).then((pc) => this.#register(pc));
    return this.#registering;
  }

  #register(pc: PromClient): Registry {
    const { Counter, Gauge } = pc;
    const opts = this.opts;
    const registry = this.registry = new pc.Registry();
    const registers = [registry];
    const topics = () => this.#figures;

    for (const [field, name, help] of MESSAGE_COUNTERS) {
      new Counter({
        name: `ferry_messages_${name}_total`,
        help: `${help}, per topic, since start-up`,
        labelNames: ["topic"],
        registers,
        collect() {
          this.reset();
          for (const t of topics()) this.inc({ topic: t.name }, t.counters[field]);
        },
      });
    }
    new Gauge({
      name: "ferry_queue_depth",
      help: "Messages ready for the default group of a topic",
      labelNames: ["topic"],
      registers,
      collect() {
        this.reset();
        for (const t of topics()) this.set({ topic: t.name }, t.ready);
      },
    });
    new Gauge({
      name: "ferry_queue_in_flight",
      help: 'Messages delivered and not yet acked, per topic and group (default group: "")',
      labelNames: ["topic", "group"],
      registers,
      collect() {
        this.reset();
        for (const t of topics()) {
          for (const g of t.groups) this.set({ topic: t.name, group: g.name }, g.inFlight);
        }
      },
    });
    const broker = () => this.#broker;
    new Gauge({
      name: "ferry_oldest_message_age_seconds",
      help: 'Age of the oldest message a group holds, per topic and group (default group: "")',
      labelNames: ["topic", "group"],
      registers,
      collect() {
        this.reset();
        for (const t of topics()) {
          for (const g of t.groups) this.set({ topic: t.name, group: g.name }, g.oldestAgeSeconds);
        }
      },
    });
    new Gauge({
      name: "ferry_memory_held_bytes",
      help: "Bytes a topic's messages hold against BROKER_MAX_MEMORY (payload + overhead)",
      labelNames: ["topic"],
      registers,
      collect() {
        this.reset();
        for (const t of topics()) this.set({ topic: t.name }, t.heldBytes);
      },
    });
    new Gauge({
      name: "ferry_memory_budget_bytes",
      help: "BROKER_MAX_MEMORY: what the broker's messages may hold",
      registers,
      collect() {
        const b = broker();
        if (b) this.set(b.memory.budget);
      },
    });
    new Gauge({
      name: "ferry_disk_free_bytes",
      help: "Free bytes of the data directory's file system at the last check",
      registers,
      collect() {
        this.reset();
        const d = broker()?.disk;
        if (d && Number.isFinite(d.freeBytes)) this.set(d.freeBytes);
      },
    });
    new Gauge({
      name: "ferry_disk_free_limit_bytes",
      help: "BROKER_DISK_FREE_LIMIT: below it publishes are refused (507 disk_full)",
      registers,
      collect() {
        this.reset();
        const d = broker()?.disk;
        if (d) this.set(d.limitBytes);
      },
    });
    new Gauge({
      name: "ferry_disk_alarm",
      help: "1 while the data directory's free space is below BROKER_DISK_FREE_LIMIT, else 0",
      registers,
      collect() {
        this.reset();
        const d = broker()?.disk;
        if (d) this.set(d.alarm ? 1 : 0);
      },
    });
    new Counter({
      name: "ferry_messages_rejected_total",
      help: "Publishes refused, per topic and reason (queue_full, memory_full), since start-up",
      labelNames: ["topic", "reason"],
      registers,
      collect() {
        this.reset();
        for (const t of topics()) {
          this.inc({ topic: t.name, reason: "queue_full" }, t.counters.rejectedQueueFull);
          this.inc({ topic: t.name, reason: "memory_full" }, t.counters.rejectedMemoryFull);
        }
      },
    });
    new Gauge({
      name: "ferry_stream_subscribers",
      help: "Live stream listeners (SSE, WebSocket) per topic",
      labelNames: ["topic"],
      registers,
      collect() {
        this.reset();
        const b = broker();
        if (!b) return;
        for (const t of topics()) this.set({ topic: t.name }, b.feed.count(t.name));
      },
    });
    new Counter({
      name: "ferry_webhook_deliveries_total",
      help:
        "Webhook POSTs per topic and outcome (delivered, retried, dead_lettered, gone, broadcast)",
      labelNames: ["topic", "outcome"],
      registers,
      collect() {
        this.reset();
        const outcomes = broker()?.pushers?.outcomes ?? new Map();
        for (const [topic, byOutcome] of outcomes) {
          for (const [outcome, n] of byOutcome) this.inc({ topic, outcome }, n);
        }
      },
    });
    const rateLimited = this.#rateLimited;
    new Counter({
      name: "ferry_rate_limited_total",
      help: "Publishes refused 429 rate_limited, per API key name (never the key)",
      labelNames: ["key"],
      registers,
      collect() {
        this.reset();
        for (const [key, n] of rateLimited) this.inc({ key }, n);
      },
    });
    const cluster = () => this.#broker?.cluster;
    const replicaLag = () => {
      const b = this.#broker;
      return b?.cluster?.role === "leader" ? b.replicator?.lag() : undefined;
    };
    new Gauge({
      name: "ferry_cluster_role",
      help: "1 for this node's current role in the cluster (leader, follower, candidate)",
      labelNames: ["role"],
      registers,
      collect() {
        this.reset();
        const c = cluster();
        if (!c) return;
        for (const role of ["leader", "follower", "candidate"]) {
          this.set({ role }, c.role === role ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "ferry_cluster_term",
      help: "The highest election term this node has seen",
      registers,
      collect() {
        const c = cluster();
        if (c) this.set(c.term);
      },
    });
    new Gauge({
      name: "ferry_replication_lag_records",
      help: "Stream entries a connected follower has yet to confirm on disk (on the leader)",
      labelNames: ["peer"],
      registers,
      collect() {
        this.reset();
        for (const [peer, n] of replicaLag() ?? []) this.set({ peer }, n);
      },
    });
    const replicaLagSeconds = () => {
      const b = this.#broker;
      return b?.cluster?.role === "leader" ? b.replicator?.lagSeconds() : undefined;
    };
    new Gauge({
      name: "ferry_replication_lag_seconds",
      help: "How long a connected follower has had stream entries it has not confirmed (leader)",
      labelNames: ["peer"],
      registers,
      collect() {
        this.reset();
        for (const [peer, n] of replicaLagSeconds() ?? []) this.set({ peer }, n);
      },
    });
    new Counter({
      name: "ferry_elections_total",
      help: "Elections this node has won since start-up",
      registers,
      collect() {
        this.reset();
        const c = cluster();
        if (c) this.inc(c.elections);
      },
    });
    const routes = this.#routes;
    new Counter({
      name: "ferry_http_requests_total",
      help: "HTTP requests per route pattern and status code",
      labelNames: ["route", "code"],
      registers,
      collect() {
        this.reset();
        for (const [route, s] of routes) {
          for (const [code, n] of s.codes) this.inc({ route, code: String(code) }, n);
        }
      },
    });
    this.#histogram(
      "ferry_http_request_duration_seconds",
      "HTTP request duration per route",
      () => [...routes].map(([route, s]) => [{ route }, s.durations]),
    );
    this.#histogram(
      "ferry_wal_fsync_seconds",
      "Duration of one WAL fsync",
      () => [[{}, this.fsync]],
    );
    this.#histogram(
      "ferry_publish_batch_messages",
      "Messages per batch publish request (POST /publish/{topic}/batch) that was stored",
      () => [[{}, this.batch]],
    );
    this.#histogram(
      "ferry_webhook_duration_seconds",
      "Time from a webhook POST to its answer (or failure), per topic",
      () => [...this.#webhooks].map(([topic, b]) => [{ topic }, b]),
    );
    if (opts.process ?? true) addProcessMetrics(pc, registry);
    return registry;
  }

  /** Makes this the broker's metrics and the source of the per-topic series. */
  attach(broker: MetricsSource): this {
    this.#broker = broker;
    return this;
  }

  /** Counts one HTTP answer; `route` is the route pattern or UNMATCHED. */
  recordRequest(route: string, code: number, seconds: number): void {
    let s = this.#routes.get(route);
    if (!s) {
      this.#routes.set(route, s = { codes: new Map(), durations: new Buckets(HTTP_BUCKETS_S) });
    }
    s.codes.set(code, (s.codes.get(code) ?? 0) + 1);
    s.durations.observe(seconds);
  }

  /** Counts one batch publish of `messages` messages. */
  observeBatch(messages: number): void {
    this.batch.observe(messages);
  }

  /** A publish by key `name` was refused for its limits. */
  readonly rateLimited = (name: string): void => {
    this.#rateLimited.set(name, (this.#rateLimited.get(name) ?? 0) + 1);
  };

  /** For Broker.open's `onFsync`. */
  readonly observeFsync = (seconds: number): void => this.fsync.observe(seconds);

  /** For Broker.open's `onWebhookPost`. */
  readonly observeWebhook = (topic: string, seconds: number): void => {
    let b = this.#webhooks.get(topic);
    if (!b) this.#webhooks.set(topic, b = new Buckets(HTTP_BUCKETS_S));
    b.observe(seconds);
  };

  /** The Prometheus text exposition of every metric. */
  async render(): Promise<string> {
    const b = this.#broker;
    this.#figures = b ? b.stats.figures(b.now()) : [];
    try {
      return await (await this.#registryNow()).metrics();
    } finally {
      this.#figures = [];
    }
  }

  /**
   * Registers a histogram read from Buckets at scrape time. prom-client has no public way to
   * set bucket counts, so this is a plain metric object of the shape its Registry reads, as
   * its own cluster aggregator registers.
   */
  #histogram(
    name: string,
    help: string,
    series: () => [Record<string, string>, Buckets][],
  ): void {
    const base = { name, help, type: "histogram", aggregator: "sum" };
    const get = () => ({
      ...base,
      values: series().flatMap(([labels, b]) => {
        const values = [];
        let acc = 0;
        for (let i = 0; i <= b.bounds.length; i++) {
          acc += b.counts[i]!;
          const le = i < b.bounds.length ? String(b.bounds[i]) : "+Inf";
          values.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: acc });
        }
        values.push({ metricName: `${name}_sum`, labels, value: b.sum });
        values.push({ metricName: `${name}_count`, labels, value: b.count });
        return values;
      }),
    });
    this.registry!.registerMetric({ ...base, get } as unknown as Metric);
  }
}

/** Metric families of prom-client's defaults that mean something under Deno. */
const PROCESS_METRICS = /^(process_|nodejs_heap_|nodejs_external_memory)/;

/**
 * prom-client's process metrics, minus the Node-only ones (event-loop lag, handles, GC, Node
 * version) that read nothing under Deno. Without read access to /proc they report zeros.
 */
function addProcessMetrics({ collectDefaultMetrics, Gauge }: PromClient, registry: Registry): void {
  try {
    // The event-loop-lag metrics are dropped below, but collecting them samples the loop every
    // eventLoopMonitoringPrecision ms (default 10: ~0.6 % of a core on an idle broker, measured):
    // the longest interval a timer takes keeps that monitor asleep.
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 2 ** 31 - 1 });
  } catch {
    return; // process metrics are a bonus; the broker's own metrics do not depend on them
  }
  for (const m of registry.getMetricsAsArray()) {
    if (!m.name.startsWith("ferry_") && !PROCESS_METRICS.test(m.name)) {
      registry.removeSingleMetric(m.name);
    }
  }
  // prom-client reads RSS from /proc/self, which the start task's permissions do not open.
  registry.removeSingleMetric("process_resident_memory_bytes");
  new Gauge({
    name: "process_resident_memory_bytes",
    help: "Resident memory size in bytes",
    registers: [registry],
    collect() {
      this.set(Deno.memoryUsage().rss);
    },
  });
}
