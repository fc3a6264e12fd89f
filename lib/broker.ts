/**
 * @module The facade routes call: the request gate, open and close, and the topics (topics.ts).
 * Each verb checks the gate and hands over to the module that owns it: publish.ts,
 * delivery/ (deliveries, group_lifecycle, dead_letter, consumers, scheduler), storage/compactor.ts,
 * storage/recovery.ts, stats.ts, rates.ts, feed.ts, and in a cluster cluster/ (leadership,
 * replicator, follower). Every operation decides and mutates synchronously, then awaits only the
 * WAL (and, on a cluster's leader, its synchronous follower).
 */

import { owns, type Shard, type SharedFigures } from "./shard.ts";
import { Alarm } from "./delivery/alarm.ts";
import { Compactor } from "./storage/compactor.ts";
import { type Config, DLQ_SUFFIX, VERSION } from "./config.ts";
import { Consumers } from "./delivery/consumers.ts";
import { DataDirLock } from "./storage/data_dir_lock.ts";
import { DiskAlarm } from "./storage/disk_alarm.ts";
import type { BrokerContext, EffectiveSettings } from "./context.ts";
import * as deliveries from "./delivery/deliveries.ts";
import * as groups from "./delivery/group_lifecycle.ts";
import { redrive } from "./delivery/dead_letter.ts";
import { BrokerError } from "./errors.ts";
import type { Group } from "./delivery/group.ts";
import { type Logger, silentLogger } from "./log.ts";
import { type BodyHold, MemoryBudget } from "./memory/budget.ts";
import { checkName } from "./names.ts";
import { loadNodeId } from "./node_id.ts";
import * as publishing from "./publish.ts";
import { type BatchItem, publishBatch } from "./publish_batch.ts";
import { recover, type RecoveryReport } from "./storage/recovery.ts";
import { COMPACT_CHECK_MS, MIN_SWEEP_GAP_MS, Scheduler } from "./delivery/scheduler.ts";
import type { ClusterState } from "./cluster/state.ts";
import { Follower } from "./cluster/follower.ts";
import type { ReplicaLink, Replicator } from "./cluster/replicator.ts";
import type { ClusterMember } from "./cluster/member.ts";
import { ReplicatedWal } from "./cluster/replicated_wal.ts";
import { followLeadership } from "./cluster/leadership.ts";
import { Rates } from "./rates.ts";
import { Stats } from "./stats.ts";
import { Feed } from "./feed.ts";
import { Registry } from "./topics.ts";
import { type Topic, type TopicOptions, type TopicView, webhookGroup } from "./topic.ts";
import { defaultOpenWal } from "./storage/open_wal.ts";
import type { OpenWal } from "./storage/wal.ts";
import { type PushSink, SinkConsumer } from "./push/consumer.ts";
import {
  type Attempt,
  Pushers,
  type WebhookSend,
  type WebhookStatus,
  type WebhookVet,
} from "./push/webhook_pusher.ts";
import * as webhooks from "./push/webhook_registry.ts";
import { loadSecretBox, type SecretBox } from "./push/secret_box.ts";
import type { Webhook } from "./push/webhook_registry.ts";
import { type MetaRecord, RecordType } from "./storage/record.ts";

export type { ConsumeOptions, Handed, Leased, Requeued } from "./delivery/deliveries.ts";
export type { Published, PublishOptions } from "./publish.ts";
export type { BatchItem } from "./publish_batch.ts";

/** A follower's connection, attached to the stream: its acks, and its end. */
export interface ReplicaHandle {
  ack(index: number): void;
  detach(reason: string): void;
}

/** A cluster node's view of its peers; the lags and the synchronous set only while it leads. */
export interface ClusterView {
  state: ClusterState;
  /** Records each follower has yet to acknowledge, by node id. */
  lag: Map<string, number> | undefined;
  /** Seconds the oldest unacknowledged record of each follower has waited, by node id. */
  lagSeconds: Map<string, number> | undefined;
  /** The followers whose acks a write waits for. */
  synchronous: ReadonlySet<string>;
}

/** Options of Broker.open. */
export interface OpenOptions {
  clock?: () => number;
  log?: Logger;
  /** Run the sweep on the broker's alarm, at each deadline (default: yes unless a clock is given). */
  tick?: boolean;
  onFsync?: (seconds: number) => void;
  /** Opens each topic's WAL (default: a FileWal in the data dir, or a MemoryWal for :memory:). */
  openWal?: OpenWal;
  /** Sends webhook POSTs (runtime.ts: fetch); without it no webhook is pushed to. */
  send?: WebhookSend;
  /** Checks a webhook URL's target against the egress policy as it is registered. */
  vet?: WebhookVet;
  /** Hears how long each webhook POST took, in seconds. */
  onWebhookPost?: (topic: string, seconds: number) => void;
  /**
   * Makes the broker a node of a cluster (runtime.ts `joinCluster`): called once the node id is
   * known and before any WAL opens, so every topic's WAL ships through the member's replicator.
   */
  joinCluster?: (broker: Broker) => ClusterMember;
  /**
   * One worker of several (BROKER_WORKERS): it replays and creates only the topics it owns, and
   * counts the others' topics and memory toward the limits. The supervisor holds the data dir's
   * lock for all of them, so a worker takes none.
   */
  shard?: { shard: Shard; figures: SharedFigures };
  /** The node's id when the supervisor has read it (workers); else read from the data dir. */
  nodeId?: string;
}

/** The broker: a registry of topics and the operations on them. */
export class Broker implements BrokerContext {
  readonly #topics: Registry;
  readonly startedAt: number;
  readonly now: () => number;
  readonly log: Logger;
  readonly memory: MemoryBudget;
  /** Seals and opens webhook secrets; set by open(). */
  secrets!: SecretBox;
  readonly consumers: Consumers;
  readonly stats: Stats;
  /** Rates over the last minutes, sampled by the sweep. */
  readonly rates: Rates;
  /** This node's part in its cluster (OpenOptions.joinCluster): `start()` it once listening. */
  member: ClusterMember | undefined;
  /** This node's place in a cluster (attachCluster); undefined: standalone. */
  cluster: ClusterState | undefined;
  /** Ships this node's writes to its followers while it leads (cluster mode). */
  replicator: Replicator | undefined;
  readonly scheduler: Scheduler;
  readonly #compactor: Compactor;
  /** The durable feed: subscribers, resume rings, taps. */
  readonly feed: Feed;
  /** The webhooks' pushers, when the broker was given a way to send. */
  readonly pushers: Pushers | undefined;
  draining = false;
  /** The data directory's free space against BROKER_DISK_FREE_LIMIT; none with `:memory:` or 0. */
  readonly disk: DiskAlarm | undefined;
  /** Rings the sweep at the earliest deadline (alarm.ts); idle unless `tick`. */
  readonly #alarm: Alarm;
  #closed = false;
  #lock: DataDirLock | undefined;
  readonly #vet: WebhookVet | undefined;
  readonly #onDrain = new Set<() => void>();
  /** Stable id of this node, kept in the data dir (a new one per process with `:memory:`). */
  nodeId = "";
  /** Which of the node's workers this broker is (OpenOptions.shard); undefined: the only one. */
  readonly shard: Shard | undefined;
  /** What start-up replay found, for the start-up log line. */
  recovery: RecoveryReport = { topics: 0, messages: 0, records: 0, duration_ms: 0, held_bytes: 0 };

  private constructor(readonly config: Config, opts: OpenOptions) {
    this.now = opts.clock ?? Date.now;
    this.log = opts.log ?? silentLogger;
    this.shard = opts.shard?.shard;
    this.#vet = opts.vet;
    this.startedAt = this.now();
    // Without a file every payload stays in memory: there is nowhere else to read it from.
    const cache = config.dataDir === ":memory:" ? Infinity : config.payloadCacheBytes;
    this.memory = new MemoryBudget(config.maxMemoryBytes, cache, opts.shard?.figures);
    this.disk = config.dataDir === ":memory:" || config.diskFreeLimitBytes === 0
      ? undefined
      : new DiskAlarm(config.dataDir, config.diskFreeLimitBytes, this.log);
    const openWal = opts.openWal ??
      defaultOpenWal(config, this.log, opts.onFsync, () => void this.disk?.check());
    this.#alarm = new Alarm(this.now, (now) => this.#rung(now));
    // Every WAL's durable records feed the subscribers, and writes ask for a compaction check.
    // In a cluster they also ship their appends through the replicator while this node leads.
    const feedWal: OpenWal = (name, init) => {
      const wal = openWal(name, {
        ...init,
        onDurable: (records) => {
          this.feed.durable(name, records);
          this.#alarm.request(this.now() + COMPACT_CHECK_MS);
        },
      });
      return this.replicator ? new ReplicatedWal(name, wal, this.replicator) : wal;
    };
    this.#topics = new Registry(
      config,
      this.memory,
      this.now,
      feedWal,
      (at) => this.wake(at),
      opts.shard,
    );
    this.feed = new Feed(config.streamBuffer, (n) => this.#topics.find(n), this.log);
    this.consumers = new Consumers(deliveries.take, (at) => this.wake(at));
    this.pushers = opts.send && new Pushers(this, this.consumers, opts.send, {
      version: VERSION,
      concurrency: config.webhookConcurrency,
      retryScheduleMs: config.webhookRetryScheduleMs,
      onPost: opts.onWebhookPost,
    }, (id) => {
      this.removeWebhook(id, "its endpoint answered 410 Gone").catch((e) =>
        this.log.warn("webhook not removed", { id, error: e })
      );
    });
    this.stats = new Stats(() => this.#topics.values(), (n) => this.#topics.find(n));
    this.rates = new Rates(this.stats, () => this.#topics.values());
    this.#compactor = new Compactor(config, this.log, this.now);
    this.scheduler = new Scheduler(
      this,
      () => this.#topics.values(),
      this.consumers,
      this.#compactor,
    );
  }

  /**
   * Locks the data dir, replays every WAL file, and starts the sweep timer. Throws
   * DataDirInUseError, having read no WAL file, when another broker holds the data dir.
   */
  static async open(config: Config, opts: OpenOptions = {}): Promise<Broker> {
    const lock = config.dataDir === ":memory:" || opts.shard
      ? undefined
      : await DataDirLock.acquire(config.dataDir, opts.log);
    try {
      const b = new Broker(config, opts);
      b.#lock = lock;
      b.secrets = await loadSecretBox(config);
      b.nodeId = opts.nodeId ?? await loadNodeId(config.dataDir);
      const member = opts.joinCluster?.(b);
      if (member) b.attachCluster(member.state, member.replicator);
      if (member && !config.webhookKeyFile) {
        b.log.warn("webhook key is this node's own: give every node the same one", {
          key: b.secrets.source,
          key_id: b.secrets.id,
          fix: "set BROKER_WEBHOOK_KEY_FILE on every node, or copy this webhook.key to the others",
        });
      }
      b.member = member;
      if (config.dataDir !== ":memory:") {
        const { topics, report } = await recover({
          dataDir: config.dataDir,
          now: b.now(),
          log: b.log,
          memory: b.memory,
          diskPayloadMin: b.#topics.diskPayloadMin,
          openWal: (name, size, replayed) => b.#topics.openWal(name, { size, replayed }),
          owns: (name) => owns(opts.shard?.shard, name),
        });
        b.#topics.add(topics);
        if (!b.cluster) {
          // Secrets an older broker wrote plain: sealed now, and gone from the files at once.
          for (const t of await webhooks.sealPlainSecrets(b)) {
            await b.#compactor.compact(t).catch((e) =>
              b.log.error("compaction failed", { topic: t.name, error: e })
            );
          }
        }
        // A cluster node pushes only while it leads (cluster/leadership.ts starts them then).
        if (!b.cluster) { for (const t of topics) b.pushers?.sync(t); }
        b.recovery = report;
      }
      await b.disk?.check();
      if (opts.tick ?? !opts.clock) {
        b.#alarm.start();
        b.disk?.start();
      }
      return b;
    } catch (e) {
      await lock?.release();
      throw e;
    }
  }

  /**
   * The data dir's lock, held from before replay until close (none with `:memory:`). A test
   * that abandons a broker as if its process died releases it, as the kernel would.
   */
  get dataDirLock(): DataDirLock | undefined {
    return this.#lock;
  }

  get version(): string {
    return VERSION;
  }

  /** False once any WAL write has failed: the node must not be trusted with writes. */
  get healthy(): boolean {
    return this.stats.healthy;
  }

  // ---- topics and groups -------------------------------------------------------------------

  findTopic(name: string): Topic | undefined {
    return this.#topics.find(name);
  }

  getTopic(name: string): Topic {
    return this.#topics.find(name) ?? this.#created(this.#topics.create(name, {}));
  }

  /** A topic just created: long-polls waiting for its name wait on it from now (consumers.ts). */
  #created(topic: Topic): Topic {
    this.consumers.adopt(topic, this.now());
    return topic;
  }

  eachTopic(): Iterable<Topic> {
    return this.#topics.values();
  }

  /** Creates a topic in advance; 409 when it exists. */
  createTopic(name: string, opts: TopicOptions): Promise<Topic> {
    this.#gate();
    checkName(name, "topic");
    if (this.#topics.has(name)) {
      throw new BrokerError("already_exists", `Cannot create topic "${name}": it already exists`);
    }
    const topic = this.#created(this.#topics.create(name, opts));
    return topic.wal.barrier().then(() => topic);
  }

  effective(topic: TopicView): EffectiveSettings {
    return {
      visibilityMs: topic.settings.visibilityMs || this.config.visibilityMs,
      maxMessages: topic.settings.maxMessages || this.config.maxQueue,
    };
  }

  getGroup(topic: Topic, name: string): Group {
    return groups.getGroup(this, topic, name);
  }

  /** Creates a named group that receives messages published from now on; 409 if it exists. */
  createGroup(name: string, group: string): Promise<Group> {
    this.#gate();
    this.#intact("create a group of", name);
    return groups.createGroup(this, name, group);
  }

  listGroups(name: string): Group[] {
    this.#gate();
    return groups.listGroups(this, name);
  }

  /** Empties a topic (groups and settings stay) and shrinks its WAL file; returns how many went. */
  async purge(name: string): Promise<number> {
    this.#gate();
    this.#intact("purge", name);
    checkName(name, "queue");
    const topic = this.#topics.find(name);
    if (!topic) throw new BrokerError("not_found", `Cannot purge "${name}": no such queue`);
    const purged = topic.messages.size;
    const now = this.now();
    await topic.commit({ type: RecordType.Purge, seq: topic.nextSeq() }, now);
    await this.#compactor.compact(topic);
    this.log.info("purged", { topic: name, purged });
    return purged;
  }

  /** Deletes a topic and its WAL file; parked consumers get an empty answer. */
  async deleteTopic(name: string): Promise<void> {
    this.#gate();
    checkName(name, "queue");
    const topic = this.#topics.find(name);
    if (!topic) throw new BrokerError("not_found", `Cannot delete "${name}": no such queue`);
    await this.dropTopic(topic);
    this.log.info("deleted", { topic: name });
  }

  /** Takes a topic and its file away, with no checks (deleteTopic, and a follower's apply). */
  async dropTopic(topic: Topic): Promise<void> {
    topic.releaseMemory();
    this.stats.retire(topic);
    this.#compactor.forget(topic);
    this.pushers?.forget(topic);
    this.consumers.release(topic);
    this.feed.forget(topic.name);
    await this.#topics.delete(topic);
  }

  /** Creates a topic from a leader's META record (a follower applying the stream). */
  adoptTopic(name: string, meta: MetaRecord): { topic: Topic; durable: Promise<void> } {
    return this.#topics.adopt(name, meta);
  }

  // ---- the verbs ---------------------------------------------------------------------------

  publish(name: string, payload: Uint8Array, opts?: publishing.PublishOptions) {
    this.#gate();
    this.#intact("publish to", name);
    this.disk?.assertRoom(name);
    this.disk?.spend(payload.length);
    return publishing.publish(this, name, payload, opts);
  }

  /** Stores many messages at once, all or nothing, with one WAL batch (publish_batch.ts). */
  publishBatch(name: string, items: readonly BatchItem[]) {
    this.#gate();
    this.#intact("publish to", name);
    this.disk?.assertRoom(name);
    if (this.disk) { for (const item of items) this.disk.spend(item.payload.length); }
    return publishBatch(this, name, items);
  }

  reserve(name: string, declaredBytes: number): BodyHold {
    this.#gate();
    this.#intact("publish to", name);
    this.disk?.assertRoom(name);
    return publishing.reserve(this, name, declaredBytes);
  }

  broadcast(name: string, payload: Uint8Array, opts?: publishing.PublishOptions): number {
    this.#gate();
    return publishing.broadcast(this, this.consumers, this.feed, name, payload, opts);
  }

  consume<T = deliveries.Handed[]>(
    name: string,
    opts: deliveries.ConsumeOptions = {},
    handOver: (messages: deliveries.Handed[]) => T = (m) => m as unknown as T,
  ): Promise<T> {
    this.#gate();
    if (!opts.peek) this.#intact("consume from", name);
    return deliveries.consume(this, this.consumers, name, opts, (messages) => {
      // A long-poll ended by a drain or shutdown says so: the queue may well not be empty.
      if (!messages.length && this.draining) throw this.#stoppedWaiting(name);
      return handOver(messages);
    });
  }

  #stoppedWaiting(name: string): BrokerError {
    const retry = this.cluster ? "retry on another node" : "retry once it has restarted";
    return new BrokerError(
      "draining",
      `Stopped waiting for a message in "${name}": the broker is draining (stopping); ${retry}`,
    );
  }

  peek(name: string, limit?: number): deliveries.Handed[] {
    this.#gate();
    return deliveries.peek(this, name, limit);
  }

  ack(name: string, group: string, ids: string[]) {
    this.#gate();
    this.#intact("ack in", name);
    return deliveries.ack(this, name, group, ids);
  }

  requeue(
    name: string,
    group: string,
    id: string,
    opts?: { delayMs?: number; reason?: string; deadLetter?: boolean },
  ) {
    this.#gate();
    this.#intact("requeue in", name, name + DLQ_SUFFIX);
    return deliveries.requeue(this, name, group, id, opts);
  }

  touch(name: string, group: string, id: string, byMs?: number): number {
    this.#gate();
    this.#intact("touch a message of", name);
    return deliveries.touch(this, name, group, id, byMs);
  }

  /** Extends the leases of many in-flight messages; ids not in flight are listed. */
  touchMany(name: string, group: string, ids: string[], byMs?: number) {
    this.#gate();
    this.#intact("touch messages of", name);
    return deliveries.touchMany(this, name, group, ids, byMs);
  }

  /** Moves `{topic}.dlq` back, all of it or only the messages `ids` names. */
  redrive(name: string, ids?: string[]) {
    this.#gate();
    const base = name.endsWith(DLQ_SUFFIX) ? name.slice(0, -DLQ_SUFFIX.length) : name;
    this.#intact("redrive", base, base + DLQ_SUFFIX);
    this.disk?.assertRoom(base, "redrive"); // a redrive writes every payload again
    return redrive(this, name, ids);
  }

  /** Up to `limit` messages in flight in a group, the soonest lease end first. */
  leased(name: string, group: string, limit: number) {
    return deliveries.leased(this, name, group, limit);
  }

  /** Makes an in-flight message ready again now, keeping its retry count. */
  release(name: string, group: string, id: string) {
    this.#gate();
    this.#intact("release a message of", name);
    return deliveries.release(this, name, group, id);
  }

  /**
   * A push consumer on `name`'s `group` (both created as a consume creates them) that sends to
   * `sink`, with the topic's visibility as its leases; `start()` joins it to the pipeline.
   */
  pushConsumer(name: string, group: string, sink: PushSink): SinkConsumer {
    this.#gate();
    this.#intact("consume from", name);
    const topic = this.getTopic(name);
    const g = this.getGroup(topic, group);
    const visibilityMs = this.effective(topic).visibilityMs;
    return new SinkConsumer(this.consumers, topic, g, visibilityMs, () => this.now(), sink);
  }

  /** Registers a webhook on a topic and starts pushing to it. */
  async registerWebhook(name: string, url: string, secret?: string): Promise<Webhook> {
    this.#gate();
    this.#intact("register a webhook on", name);
    const refused = await this.#vet?.(url);
    if (refused) {
      throw new BrokerError(
        "invalid_parameter",
        `Cannot register a webhook to ${url.slice(0, 200)}: the target is refused: ${refused}`,
      );
    }
    const w = await webhooks.register(this, name, url, secret);
    this.pushers?.sync(w.topic);
    return w;
  }

  /** The webhooks of `topic`, or of every topic. */
  listWebhooks(topic?: string): Webhook[] {
    return webhooks.list(this, topic);
  }

  findWebhook(id: string): Webhook | undefined {
    return webhooks.findWebhook(this, id);
  }

  /** A webhook's recent POSTs, newest first. */
  webhookAttempts(id: string): Attempt[] {
    return this.pushers?.attempts(id) ?? [];
  }

  /** A webhook's delivery as operators see it (a broker that cannot send pushes nothing). */
  webhookStatus(w: Webhook): WebhookStatus {
    return {
      paused: this.pushers?.paused(w.id) ?? false,
      pending: w.topic.groups.get(webhookGroup(w.id))?.held ?? 0,
      last: this.pushers?.attempts(w.id)[0],
    };
  }

  /** Removes a webhook, its group and what only it held; `cause` goes in the log line. */
  async removeWebhook(id: string, cause = "deleted by a client"): Promise<Webhook> {
    this.#gate();
    const w = await webhooks.remove(this, id);
    this.pushers?.sync(w.topic);
    this.log.info("webhook removed", { id, topic: w.topic.name, cause });
    return w;
  }

  deliver(topic: Topic, g: Group, now: number): void {
    this.consumers.deliver(topic, g, now);
  }

  deliverAll(topic: Topic, now: number): void {
    this.consumers.deliverAll(topic, now);
  }

  /** Asks the alarm for a sweep at `at` or earlier (no-op on a hand-driven clock). */
  wake(at: number): void {
    this.#alarm.request(at);
  }

  /**
   * The earliest time a sweep has work: a deadline of a topic or a waiting consumer, a webhook
   * probe, a compaction retry, the next rates sample or drain-rate sample.
   */
  nextDue(): number {
    const writes = !this.cluster || this.cluster.writable;
    let due = Math.min(
      this.scheduler.nextDue(writes),
      this.#compactor.nextRetry(),
      this.rates.due,
      this.memory.nextTick(),
    );
    if (writes && this.pushers) due = Math.min(due, this.pushers.nextProbe());
    return due;
  }

  /** The alarm rang: sweep, then sleep until the next deadline (MIN_SWEEP_GAP_MS at least). */
  #rung(now: number): void {
    try {
      this.sweep(now);
    } finally {
      this.#alarm.set(Math.max(this.nextDue(), now + MIN_SWEEP_GAP_MS));
    }
  }

  /**
   * Moves time to `now`: delays, TTLs, leases, idempotency keys, long-poll timeouts, compaction.
   * A node that does not lead its cluster writes nothing: it ends no lease and pushes nothing.
   */
  sweep(now: number): void {
    if (this.cluster && !this.cluster.writable) this.scheduler.sweepLocal(now);
    else {
      this.scheduler.sweep(now);
      this.pushers?.tick(now);
    }
    this.rates.sample(now);
  }

  // ---- cluster -----------------------------------------------------------------------------

  /** What this node knows of its cluster, for status pages; undefined outside cluster mode. */
  clusterView(): ClusterView | undefined {
    const state = this.cluster;
    if (!state) return undefined;
    const r = state.role === "leader" ? this.replicator : undefined;
    return {
      state,
      lag: r?.lag(),
      lagSeconds: r?.lagSeconds(),
      synchronous: new Set(r?.standbys ?? []),
    };
  }

  /**
   * A follower's connection for this worker's shard (`shard`: GET /cluster/replicate) joins the
   * stream of `term`: it gets the snapshot, then every entry. Refused (`electing`) unless this
   * node leads that term.
   */
  attachReplica(shard: number, node: string, term: number, link: ReplicaLink): ReplicaHandle {
    const { cluster, replicator } = this;
    if (!cluster || !replicator) {
      throw new BrokerError("not_found", "This node is not part of a cluster");
    }
    if (shard !== (this.shard?.index ?? 0)) throw new Error(`shard ${shard} is not this worker's`);
    cluster.assertLeads(term);
    if (!replicator.active) throw new BrokerError("electing", "This node is not leading yet");
    const session = replicator.attach(node, link);
    return {
      ack: (index) => replicator.ack(session, index),
      detach: (reason) => replicator.detach(session, reason),
    };
  }

  /**
   * Makes this broker a node of a cluster: it writes only while `state` says it leads, ships
   * its writes through `replicator` then, and pushes to webhooks only then.
   */
  attachCluster(state: ClusterState, replicator: Replicator): void {
    this.cluster = state;
    this.replicator = replicator;
    followLeadership(this, state, replicator);
    // Leading or not decides which deadlines are ours (lease ends, probes): sweep and re-arm.
    state.onChange(() => this.wake(this.now()));
  }

  /** Applies a leader's stream; one per connection to a leader. */
  follower(onBroken?: (e: Error) => void): Follower {
    return new Follower(this, this.log, onBroken);
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  /** The one refusal of work while draining; where to retry depends on whether a cluster can take it. */
  drainingError(): BrokerError {
    return new BrokerError(
      "draining",
      this.cluster
        ? "The broker is draining; retry on another node"
        : "The broker is draining (stopping); retry once it has restarted",
    );
  }

  /** Calls `fn` once when the broker starts draining or closing; returns a function that cancels. */
  onDrain(fn: () => void): () => void {
    this.#onDrain.add(fn);
    return () => this.#onDrain.delete(fn);
  }

  #drained(): void {
    const fns = [...this.#onDrain];
    this.#onDrain.clear();
    for (const fn of fns) {
      try {
        fn();
      } catch (e) {
        this.log.error("drain listener failed", { error: e });
      }
    }
  }

  #gate(): void {
    if (this.draining) {
      throw this.drainingError();
    }
    if (this.cluster && !this.cluster.writable) {
      throw new BrokerError("electing", "This node does not lead the cluster now; retry");
    }
  }

  /**
   * Refuses a change to the topics `names` (those that exist) once a log among them has failed
   * (storage_failed, docs/operating.md "Disk"): checked before anything changes. Reads, peeks
   * and deleting the topic go on.
   */
  #intact(action: string, ...names: string[]): void {
    for (const name of names) this.#topics.find(name)?.assertIntact(action);
  }

  /** Stops accepting work, answers parked consumers, and flushes every WAL. */
  async drain(): Promise<void> {
    this.draining = true;
    this.consumers.releaseAll();
    this.feed.closeAll();
    this.#drained();
    await Promise.allSettled([...this.#topics.values()].map((t) => t.wal.barrier()));
  }

  /**
   * Flushes and closes every WAL, stops the timer, and then gives up the data dir's lock, so
   * another broker may open it. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.draining = true;
    this.#alarm.stop();
    this.disk?.stop();
    this.consumers.releaseAll();
    this.feed.closeAll();
    this.#drained();
    try {
      await this.#topics.close();
    } finally {
      await this.#lock?.release();
    }
  }
}
