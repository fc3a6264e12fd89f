/**
 * @module The facade routes call: topics, publish, consume, ack, requeue, redrive, groups,
 * purge and delete, the sweep that moves time forward, drain, and start-up replay.
 * Every operation decides and mutates synchronously, then awaits only the WAL.
 */

import {
  type Config,
  DLQ_SUFFIX,
  MAX_ANSWER_PAYLOAD_BYTES,
  MAX_PAYLOAD_BYTES,
  MAX_PEEK,
  VERSION,
} from "./config.ts";
import { deadLetter, dlqName, exhausted, redrive } from "./dead_letter.ts";
import { BrokerError } from "./errors.ts";
import type { Group, TakeSpec, Waiter } from "./group.ts";
import { Heap } from "./heap.ts";
import { type Logger, silentLogger } from "./log.ts";
import {
  type Delivery,
  internHeaders,
  isoTime,
  matchesFilter,
  type MessageJson,
  messageJson,
  NORMAL,
  type PayloadLocation,
  PRIORITIES,
  State,
  StoredMessage,
} from "./message.ts";
import { checkName } from "./names.ts";
import { PayloadFile } from "./payload_file.ts";
import { copyPayload } from "./slab.ts";
import { heldSize, MemoryBudget } from "./memory.ts";
import { loadNodeId } from "./node_id.ts";
import {
  DEFAULT_GROUP,
  Topic,
  type TopicCounters,
  type TopicSettings,
  zeroCounters,
} from "./topic.ts";
import { uuidv7 } from "./uuid.ts";
import { FileWal, MemoryWal, type Wal } from "./wal.ts";
import { replayFile } from "./wal_replay.ts";
import { type Policy, type PublishRecord, RecordType } from "./wal_record.ts";

/** How often the sweep runs when the broker keeps its own time. */
export const TICK_MS = 10;
/** Wait before compacting again a topic whose last compaction left it oversized. */
const COMPACT_RETRY_MS = 1_000;

/** What a publisher may set on a message. */
export interface PublishOptions {
  ttlMs?: number;
  delayMs?: number;
  priority?: number;
  idempotencyKey?: string;
  /** `X-MQ-*` headers as [name, value, ...], names lower-cased. */
  headers?: string[];
}

/** The answer to a publish (CONTRACT "Success answers"). */
export interface PublishResult {
  id: string;
  topic: string;
  timestamp: string;
  priority: string;
  deduplicated: boolean;
  visible_at?: string;
  expires_at?: string;
}

/** What a consumer asks for. */
export interface ConsumeOptions {
  group?: string;
  limit?: number;
  timeoutMs?: number;
  autoAck?: boolean;
  peek?: boolean;
  filterKey?: string;
  filterVal?: string;
  visibilityMs?: number;
  /** Fires when the client goes away; a parked consume then leaves the queue. */
  signal?: AbortSignal;
}

export interface TopicOptions {
  policy?: Policy;
  retainMs?: number;
  visibilityMs?: number;
  maxMessages?: number;
  maxBytes?: number;
}

/** Options of Broker.open. */
export interface OpenOptions {
  clock?: () => number;
  log?: Logger;
  /** Run the sweep on a timer (default: yes unless a clock is given). */
  tick?: boolean;
  onFsync?: (seconds: number) => void;
}

interface TimedWaiter extends Waiter {
  topic: Topic;
}

/** The broker: a registry of topics and the operations on them. */
export class Broker {
  readonly topics = new Map<string, Topic>();
  readonly startedAt: number;
  readonly now: () => number;
  readonly log: Logger;
  /** What the broker's messages hold against BROKER_MAX_MEMORY. */
  readonly memory: MemoryBudget;
  draining = false;
  #waiterDeadlines = new Heap<TimedWaiter>();
  #deleting = new Map<string, Promise<void>>();
  #compacting = new Set<Topic>();
  /** Topics whose last compaction left them oversized, and when to try again. */
  #compactAgainAt = new Map<Topic, number>();
  #ticker: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  #onFsync: ((seconds: number) => void) | undefined;
  /** Counters of the topics deleted since start-up, so `totals` keeps what they counted. */
  #retired: TopicCounters = zeroCounters();
  /** Stable id of this node, kept in the data dir (a new one per process with `:memory:`). */
  nodeId = "";

  private constructor(readonly config: Config, opts: OpenOptions) {
    this.now = opts.clock ?? Date.now;
    this.log = opts.log ?? silentLogger;
    this.startedAt = this.now();
    this.#onFsync = opts.onFsync;
    this.memory = new MemoryBudget(config.maxMemoryBytes);
  }

  /** Opens the data dir, replays every WAL file, and starts the sweep timer. */
  static async open(config: Config, opts: OpenOptions = {}): Promise<Broker> {
    const broker = new Broker(config, opts);
    await broker.#recover();
    broker.nodeId = await loadNodeId(config.dataDir);
    if (opts.tick ?? !opts.clock) {
      broker.#ticker = setInterval(() => broker.sweep(broker.now()), TICK_MS);
    }
    return broker;
  }

  /** Totals over every topic since start-up, including deleted ones; summed when asked. */
  get totals(): TopicCounters {
    const sum = { ...this.#retired };
    for (const t of this.topics.values()) addCounters(sum, t.counters);
    return sum;
  }

  get version(): string {
    return VERSION;
  }

  /** False once any WAL write has failed: the node must not be trusted with writes. */
  get healthy(): boolean {
    for (const t of this.topics.values()) if (t.wal.failed) return false;
    return true;
  }

  // ---- topics ------------------------------------------------------------------------------

  /** The topic, or undefined. Never creates. */
  findTopic(name: string): Topic | undefined {
    return this.topics.get(name);
  }

  /** The topic, created with default settings when missing. */
  getTopic(name: string): Topic {
    return this.topics.get(name) ?? this.#create(name, {});
  }

  /**
   * Every topic counts toward BROKER_MAX_TOPICS except the dead-letter queue of a topic that
   * exists: dead-lettering must always be able to create it, and it never outnumbers its topics.
   */
  #countsTowardLimit(name: string): boolean {
    return !(name.endsWith(DLQ_SUFFIX) && this.topics.has(name.slice(0, -DLQ_SUFFIX.length)));
  }

  #create(name: string, opts: TopicOptions): Topic {
    checkName(name, "topic");
    if (this.#countsTowardLimit(name)) {
      let n = 0;
      for (const t of this.topics.keys()) if (this.#countsTowardLimit(t)) n++;
      if (n >= this.config.maxTopics) {
        throw new BrokerError(
          "topic_limit_reached",
          `Cannot create topic "${name}": the broker holds ${n} topics (BROKER_MAX_TOPICS=${this.config.maxTopics})`,
        );
      }
    }
    const now = this.now();
    const settings: TopicSettings = {
      policy: opts.policy ?? "reject",
      retainMs: opts.retainMs ?? 0,
      visibilityMs: opts.visibilityMs ?? 0,
      maxMessages: opts.maxMessages ?? 0,
      maxBytes: opts.maxBytes ?? 0,
      createdAt: now,
    };
    const topic = new Topic(
      name,
      settings,
      this.#openWal(name, 0),
      this.memory,
      this.#diskPayloadMin,
    );
    this.topics.set(name, topic);
    topic.commit({ type: RecordType.Meta, seq: topic.nextSeq(), ...settings }, now)
      .catch(() => {}); // a failed write marks the WAL failed; later writes report it
    return topic;
  }

  #openWal(name: string, size: number, replayed?: PayloadFile): Wal {
    if (this.config.dataDir === ":memory:") return new MemoryWal();
    return new FileWal(`${this.config.dataDir}/${name}.wal`, this.config.dataDir, size, {
      fsync: this.config.fsync,
      log: this.log,
      onFsync: this.#onFsync,
      after: this.#deleting.get(name),
      replayed,
    });
  }

  /** Payloads this large or larger stay in the WAL file; with no file, every one in memory. */
  get #diskPayloadMin(): number {
    return this.config.dataDir === ":memory:" ? Infinity : this.config.diskPayloadMinBytes;
  }

  /** Creates a topic in advance; 409 when it exists. */
  createTopic(name: string, opts: TopicOptions): Promise<Topic> {
    this.#gate();
    checkName(name, "topic");
    if (this.topics.has(name)) {
      throw new BrokerError("already_exists", `Cannot create topic "${name}": it already exists`);
    }
    const topic = this.#create(name, opts);
    return topic.wal.barrier().then(() => topic);
  }

  /** Settings of a topic with the broker defaults filled in. */
  effective(topic: Topic): { visibilityMs: number; maxMessages: number } {
    return {
      visibilityMs: topic.settings.visibilityMs || this.config.visibilityMs,
      maxMessages: topic.settings.maxMessages || this.config.maxQueue,
    };
  }

  // ---- publish -----------------------------------------------------------------------------

  /** Stores a message; resolves once durable (per BROKER_FSYNC). */
  async publish(
    name: string,
    payload: Uint8Array,
    opts: PublishOptions = {},
  ): Promise<PublishResult> {
    this.#gate();
    checkPayload(name, payload);
    const topic = this.getTopic(name);
    const now = this.now();
    const key = opts.idempotencyKey;
    if (key !== undefined) {
      const seen = topic.keys.lookup(key, now);
      if (seen) {
        await topic.wal.barrier(); // the original is durable before we point at it
        const orig = topic.messages.get(seen.id);
        return {
          id: seen.id,
          topic: name,
          timestamp: isoTime(seen.at),
          priority: PRIORITIES[orig?.priority ?? opts.priority ?? NORMAL]!,
          deduplicated: true,
        };
      }
    }
    this.#admit(name, topic, payload.length);
    this.#makeRoom(topic, payload.length, now);
    const ttl = opts.ttlMs || topic.settings.retainMs;
    const record: PublishRecord = {
      type: RecordType.Publish,
      seq: topic.nextSeq(),
      id: uuidv7(now),
      timestamp: now,
      priority: opts.priority ?? NORMAL,
      merge: false,
      expiresAt: ttl ? now + ttl : 0,
      redriveCount: 0,
      idemKey: key,
      reason: undefined,
      origin: undefined,
      headers: internHeaders(opts.headers),
      deliveries: undefined,
      dueAt: opts.delayMs ? now + opts.delayMs : 0,
      payload,
    };
    const durable = topic.commit(record, now);
    topic.counters.published++;
    if (topic.listeners.size) {
      const msg = topic.messages.get(record.id);
      if (msg) { for (const fn of topic.listeners) fn(msg); }
    }
    if (!record.dueAt) this.#wakeAll(topic, now);
    await durable;
    const result: PublishResult = {
      id: record.id,
      topic: name,
      timestamp: isoTime(now),
      priority: PRIORITIES[record.priority]!,
      deduplicated: false,
    };
    if (record.dueAt) result.visible_at = isoTime(record.dueAt);
    if (record.expiresAt) result.expires_at = isoTime(record.expiresAt);
    return result;
  }

  /**
   * Admits a publish body of `payloadBytes` before it is read (429 memory_full when the budget
   * has no room) and counts it until the returned function is called, once the body is read:
   * bodies in flight cannot take the broker past its budget either.
   */
  reserve(name: string, payloadBytes: number): () => void {
    this.#gate();
    return this.#counted(this.topics.get(name), () => this.memory.reserve(name, payloadBytes));
  }

  #admit(name: string, topic: Topic | undefined, payloadBytes: number): void {
    this.#counted(topic, () => this.memory.admit(name, payloadBytes));
  }

  /** Runs a budget check, counting a refusal on the topic when it exists. */
  #counted<T>(topic: Topic | undefined, check: () => T): T {
    try {
      return check();
    } catch (e) {
      if (topic) topic.counters.rejectedMemoryFull++;
      throw e;
    }
  }

  /**
   * Applies the topic's caps (`max_messages`, `max_bytes`) to one more message: a `reject`
   * topic refuses it (429 queue_full), a `drop-oldest` one drops its oldest messages.
   */
  #makeRoom(topic: Topic, payloadBytes: number, now: number): void {
    const { maxMessages } = this.effective(topic);
    const maxBytes = topic.settings.maxBytes || Infinity;
    const need = heldSize(payloadBytes);
    const overCount = topic.messages.size + 1 - maxMessages;
    const overBytes = topic.storedBytes + need - maxBytes;
    if (overCount <= 0 && overBytes <= 0) return;
    if (topic.settings.policy === "reject" || need > maxBytes) {
      topic.counters.rejectedQueueFull++;
      const why = need > maxBytes
        ? `the message needs ${need} bytes, more than its max_bytes of ${maxBytes}`
        : overCount > 0
        ? `queue holds ${topic.messages.size} messages (limit ${maxMessages})`
        : `queue holds ${topic.storedBytes} bytes (max_bytes ${maxBytes})`;
      throw new BrokerError("queue_full", `Cannot publish to "${topic.name}": ${why}`);
    }
    this.#dropOldest(topic, overCount, overBytes, now);
  }

  /** Drops the oldest messages until `n` are gone and `bytes` are freed. */
  #dropOldest(topic: Topic, n: number, bytes: number, now: number): void {
    const ids: string[] = [];
    let freed = 0;
    for (const msg of topic.messages.values()) {
      if (ids.length >= n && freed >= bytes) break;
      ids.push(msg.id);
      freed += msg.storedBytes;
    }
    topic.commit({ type: RecordType.Remove, seq: topic.nextSeq(), ids }, now).catch(() => {});
    this.log.debug("dropped oldest messages", { topic: topic.name, count: ids.length });
  }

  /**
   * Hands an ephemeral message to every consumer parked on the topic at this instant, and to
   * live listeners. Nothing is stored. Returns how many received it.
   */
  broadcast(name: string, payload: Uint8Array, opts: PublishOptions = {}): number {
    this.#gate();
    checkName(name, "topic");
    checkPayload(name, payload);
    const topic = this.topics.get(name);
    if (!topic) return 0;
    const now = this.now();
    const msg = new StoredMessage({
      id: uuidv7(now),
      seq: 0,
      timestamp: now,
      payload,
      priority: opts.priority ?? NORMAL,
      expiresAt: 0,
      headers: internHeaders(opts.headers),
      idemKey: undefined,
      redriveCount: 0,
      origin: undefined,
      reason: undefined,
    }, 0);
    let n = 0;
    for (const g of topic.groups.values()) {
      const waiters = g.waiters;
      g.waiters = [];
      for (const w of waiters) {
        if (w.done || (w.filter && !w.filter(payload))) {
          if (!w.done) g.waiters.push(w);
          continue;
        }
        w.done = true;
        const d: Delivery = {
          msg,
          group: g,
          state: State.Done,
          retryCount: 0,
          at: 0,
          lease: 0,
          reason: undefined,
        };
        w.settle([d]);
        n++;
      }
    }
    for (const fn of topic.listeners) {
      fn(msg);
      n++;
    }
    return n;
  }

  // ---- consume -----------------------------------------------------------------------------

  /**
   * Takes (or peeks at) up to `limit` messages, long-polling up to `timeoutMs` when empty, and
   * returns what `handOver` makes of them (by default the messages themselves). Nothing is
   * acked (auto_ack) before `handOver` has returned: when it throws, what was taken is put
   * back as it was, and the error goes to the caller.
   */
  async consume<T = MessageJson[]>(
    name: string,
    opts: ConsumeOptions = {},
    handOver: (messages: MessageJson[]) => T = (m) => m as unknown as T,
  ): Promise<T> {
    this.#gate();
    checkName(name, "topic");
    const groupName = opts.group ?? DEFAULT_GROUP;
    if (groupName) checkName(groupName, "group");
    const timeoutMs = opts.timeoutMs ?? 0;
    let topic = this.topics.get(name);
    if (!topic) {
      if (!timeoutMs) return handOver([]);
      topic = this.getTopic(name); // a consumer may wait for a topic's first message
    }
    const g = this.#getGroup(topic, groupName);
    const now = this.now();
    const spec: TakeSpec = {
      limit: opts.limit ?? 1,
      filter: opts.filterKey ? filterFn(opts.filterKey, opts.filterVal) : undefined,
      visibilityMs: opts.visibilityMs ?? this.effective(topic).visibilityMs,
      peek: opts.peek ?? false,
    };
    let taken = this.#take(topic, g, spec, now);
    if (!taken.length && timeoutMs > 0) {
      taken = await this.#park(topic, g, spec, now + timeoutMs, opts.signal);
    }
    // A broadcast hands out deliveries that are already done: there is nothing to ack.
    const leased = taken.length > 0 && !spec.peek && taken[0]!.state !== State.Done;
    let answer: T;
    try {
      answer = handOver(
        taken.map((d) =>
          messageJson(name, d.msg, d.retryCount, groupName || (d.msg.origin ?? ""), d.reason)
        ),
      );
    } catch (e) {
      if (leased && this.topics.get(name) === topic) {
        g.unlease(taken);
        topic.counters.delivered -= taken.length;
      }
      throw e;
    }
    if (opts.autoAck && leased && this.topics.get(name) === topic) {
      await this.#ack(topic, g, taken.map((d) => d.msg.id), this.now()).durable;
    }
    return answer;
  }

  #getGroup(topic: Topic, name: string): Group {
    let g = topic.groups.get(name);
    if (!g) {
      const now = this.now();
      topic.commit({ type: RecordType.Group, seq: topic.nextSeq(), name, createdAt: now }, now)
        .catch(() => {});
      g = topic.groups.get(name)!;
    }
    return g;
  }

  #take(topic: Topic, g: Group, spec: TakeSpec, now: number): Delivery[] {
    const taken = g.take(
      spec.limit,
      spec.filter,
      (d) => topic.expireIfDue(d.msg, now),
      spec.peek,
      MAX_ANSWER_PAYLOAD_BYTES,
    );
    if (!spec.peek) {
      for (const d of taken) g.lease(d, now + spec.visibilityMs);
      topic.counters.delivered += taken.length;
    }
    return taken;
  }

  #park(
    topic: Topic,
    g: Group,
    spec: TakeSpec,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<Delivery[]> {
    return new Promise((resolve) => {
      const w: TimedWaiter = {
        ...spec,
        topic,
        group: g,
        deadline,
        done: false,
        settle: (ds) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(ds);
        },
      };
      const onAbort = () => {
        if (w.done) return;
        w.done = true;
        resolve([]);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      g.waiters.push(w);
      this.#waiterDeadlines.push(deadline, w);
    });
  }

  /** Serves parked consumers of every group from what is ready now. */
  #wakeAll(topic: Topic, now: number): void {
    for (const g of topic.groups.values()) if (g.waiters.length) this.#wake(topic, g, now);
  }

  #wake(topic: Topic, g: Group, now: number): void {
    while (g.waiters.length && g.readyCount > 0) {
      let served = false;
      for (let i = 0; i < g.waiters.length; i++) {
        const w = g.waiters[i]!;
        if (w.done) {
          g.waiters.splice(i--, 1);
          continue;
        }
        const taken = this.#take(topic, g, w, now);
        if (!taken.length) continue;
        g.waiters.splice(i, 1);
        w.done = true;
        w.settle(taken);
        served = true;
        break;
      }
      if (!served) break;
    }
  }

  /** Up to MAX_PEEK messages of the default group, in delivery order, without taking them. */
  peek(name: string, limit = MAX_PEEK): MessageJson[] {
    this.#gate();
    checkName(name, "queue");
    const topic = this.topics.get(name);
    if (!topic) return [];
    const now = this.now();
    const g = topic.defaultGroup;
    const spec = {
      limit: Math.min(limit, MAX_PEEK),
      filter: undefined,
      peek: true,
      visibilityMs: 0,
    };
    return this.#take(topic, g, spec, now)
      .map((d) => messageJson(name, d.msg, d.retryCount, d.msg.origin ?? "", d.reason));
  }

  // ---- ack, requeue, touch -----------------------------------------------------------------

  /** Acks ids for a group; returns which were held and the durability promise. */
  ack(
    name: string,
    group: string,
    ids: string[],
  ): Promise<{ acked: string[]; notFound: string[] }> {
    this.#gate();
    checkName(name, "topic");
    if (group) checkName(group, "group");
    const topic = this.topics.get(name);
    const g = topic?.groups.get(group);
    if (!topic || !g) return Promise.resolve({ acked: [], notFound: [...new Set(ids)] });
    const { acked, notFound, durable } = this.#ack(topic, g, ids, this.now());
    return durable.then(() => ({ acked, notFound }));
  }

  #ack(topic: Topic, g: Group, ids: string[], now: number) {
    const acked: string[] = [];
    const notFound: string[] = [];
    const seen = new Set<string>();
    for (const id of ids) {
      if (seen.has(id)) continue;
      seen.add(id);
      (topic.delivery(g, id) ? acked : notFound).push(id);
    }
    let durable: Promise<unknown> = Promise.resolve();
    if (acked.length) {
      durable = topic.commit({
        type: RecordType.Ack,
        seq: topic.nextSeq(),
        group: g.name,
        ids: acked,
      }, now);
      topic.counters.acked += acked.length;
    }
    return { acked, notFound, durable };
  }

  #inFlight(name: string, group: string, id: string, action: string) {
    checkName(name, "topic");
    if (group) checkName(group, "group");
    const topic = this.topics.get(name);
    const g = topic?.groups.get(group);
    const d = g && topic?.delivery(g, id);
    if (!topic || !g || !d || d.state !== State.InFlight) {
      const where = group ? `"${name}" group "${group}"` : `"${name}"`;
      throw new BrokerError(
        "message_not_found",
        `Cannot ${action} message "${id}" in ${where}: no such message is in flight`,
      );
    }
    return { topic, g, d };
  }

  /** Puts an in-flight message back (or into the DLQ after MAX_ATTEMPTS). */
  async requeue(
    name: string,
    group: string,
    id: string,
    opts: { delayMs?: number; reason?: string } = {},
  ): Promise<{ id: string; topic: string; retry_count: number; status: string; queue: string }> {
    this.#gate();
    const { topic, g, d } = this.#inFlight(name, group, id, "requeue");
    const now = this.now();
    const retry = d.retryCount + 1;
    topic.counters.requeued++;
    if (exhausted(topic, retry)) {
      const dlq = this.getTopic(dlqName(name));
      await this.#deadLetter(topic, g, d, dlq, retry, opts.reason, now);
      return { id, topic: name, retry_count: retry, status: "dead_lettered", queue: dlq.name };
    }
    const dueAt = opts.delayMs ? now + opts.delayMs : 0;
    const durable = topic.commit({
      type: RecordType.Requeue,
      seq: topic.nextSeq(),
      group: g.name,
      id,
      retryCount: retry,
      dueAt,
      reason: opts.reason,
    }, now);
    if (!dueAt) this.#wake(topic, g, now);
    await durable;
    return { id, topic: name, retry_count: retry, status: "requeued", queue: name };
  }

  #deadLetter(
    topic: Topic,
    g: Group,
    d: Delivery,
    dlq: Topic,
    retry: number,
    reason: string | undefined,
    now: number,
  ): Promise<unknown> {
    const done = deadLetter(topic, g, d, dlq, retry, reason, now);
    this.#wakeAll(dlq, now);
    this.log.info("message dead-lettered", {
      topic: topic.name,
      group: g.name,
      id: d.msg.id,
      retry_count: retry,
    });
    return done;
  }

  /** Extends the lease of an in-flight message by `byMs` from now. */
  touch(
    name: string,
    group: string,
    id: string,
    byMs: number,
  ): { id: string; topic: string; visible_at: string } {
    this.#gate();
    const { g, d } = this.#inFlight(name, group, id, "touch");
    const until = this.now() + byMs;
    g.touch(d, until);
    return { id, topic: name, visible_at: isoTime(until) };
  }

  // ---- dead letters, groups, purge, delete -------------------------------------------------

  /** Moves `{topic}.dlq` back into `{topic}`; `queue` may name either. */
  async redrive(queue: string): Promise<{ queue: string; source: string; moved: number }> {
    this.#gate();
    checkName(queue, "queue");
    const base = queue.endsWith(DLQ_SUFFIX) ? queue.slice(0, -DLQ_SUFFIX.length) : queue;
    checkName(base, "queue");
    const source = dlqName(base);
    const dlq = this.topics.get(source);
    if (!dlq && !this.topics.has(base)) {
      throw new BrokerError("not_found", `Cannot redrive "${base}": no such queue`);
    }
    if (!dlq || dlq.messages.size === 0) return { queue: base, source, moved: 0 };
    const target = this.getTopic(base);
    const now = this.now();
    const room = {
      messages: this.effective(target).maxMessages - target.messages.size,
      bytes: (target.settings.maxBytes || Infinity) - target.storedBytes,
    };
    const { moved, durable } = redrive(dlq, target, room, now);
    this.#wakeAll(target, now);
    await durable;
    this.log.info("redrive", { topic: base, moved });
    return { queue: base, source, moved };
  }

  /** Creates a named group that receives messages published from now on; 409 if it exists. */
  async createGroup(
    name: string,
    group: string,
  ): Promise<{ topic: string; group: string; created_at: string }> {
    this.#gate();
    checkName(name, "topic");
    checkName(group, "group");
    const topic = this.getTopic(name);
    if (topic.groups.has(group)) {
      throw new BrokerError(
        "already_exists",
        `Cannot create group "${group}" on "${name}": it already exists`,
      );
    }
    const g = this.#getGroup(topic, group);
    await topic.wal.barrier();
    return { topic: name, group, created_at: isoTime(g.createdAt) };
  }

  /** Named groups of a topic. */
  listGroups(name: string): { topic: string; group: string; created_at: string }[] {
    this.#gate();
    checkName(name, "topic");
    const topic = this.topics.get(name);
    if (!topic) {
      throw new BrokerError("not_found", `Cannot list groups of "${name}": no such topic`);
    }
    return [...topic.groups.values()].filter((g) => g.name !== DEFAULT_GROUP)
      .map((g) => ({ topic: name, group: g.name, created_at: isoTime(g.createdAt) }));
  }

  /** Empties a topic (groups and settings stay) and shrinks its WAL file. */
  async purge(name: string): Promise<{ queue: string; purged: number }> {
    this.#gate();
    checkName(name, "queue");
    const topic = this.topics.get(name);
    if (!topic) throw new BrokerError("not_found", `Cannot purge "${name}": no such queue`);
    const purged = topic.messages.size;
    const now = this.now();
    await topic.commit({ type: RecordType.Purge, seq: topic.nextSeq() }, now);
    await this.#compact(topic);
    this.log.info("purged", { topic: name, purged });
    return { queue: name, purged };
  }

  /** Deletes a topic and its WAL file; parked consumers get an empty answer. */
  async deleteTopic(name: string): Promise<{ queue: string; deleted: boolean }> {
    this.#gate();
    checkName(name, "queue");
    const topic = this.topics.get(name);
    if (!topic) throw new BrokerError("not_found", `Cannot delete "${name}": no such queue`);
    this.topics.delete(name);
    topic.releaseMemory();
    addCounters(this.#retired, topic.counters);
    this.#compactAgainAt.delete(topic);
    this.#release(topic);
    const gone = topic.wal.remove();
    const guard = gone.catch(() => {}).finally(() => {
      if (this.#deleting.get(name) === guard) this.#deleting.delete(name);
    });
    this.#deleting.set(name, guard);
    await gone;
    this.log.info("deleted", { topic: name });
    return { queue: name, deleted: true };
  }

  #release(topic: Topic): void {
    for (const w of topic.waiters()) {
      if (w.done) continue;
      w.done = true;
      w.settle([]);
    }
    for (const g of topic.groups.values()) g.waiters = [];
  }

  // ---- time --------------------------------------------------------------------------------

  /** Moves time to `now`: delays, TTLs, leases, idempotency keys, long-poll timeouts, compaction. */
  sweep(now: number): void {
    this.memory.tick(now);
    for (const topic of this.topics.values()) {
      try {
        this.#sweepTopic(topic, now);
      } catch (e) {
        // A bug in one topic's sweep must not stop time for the others, nor kill the process.
        this.log.error("sweep failed", { topic: topic.name, error: e });
      }
    }
    while (this.#waiterDeadlines.peekKey() <= now) {
      const w = this.#waiterDeadlines.pop()!;
      if (w.done) continue;
      w.done = true;
      const list = w.group.waiters;
      const i = list.indexOf(w);
      if (i >= 0) list.splice(i, 1);
      w.settle([]);
    }
  }

  #sweepTopic(topic: Topic, now: number): void {
    while (topic.expiry.peekKey() <= now) topic.expireIfDue(topic.expiry.pop()!, now);
    for (const g of topic.groups.values()) {
      for (const d of g.endedLeases(now)) this.#leaseEnded(topic, g, d, now);
      g.promoteDue(now);
      if (g.waiters.length && g.readyCount) this.#wake(topic, g, now);
    }
    if (topic.keys.size) topic.keys.expire(now);
    this.#maybeCompact(topic, now);
  }

  #leaseEnded(topic: Topic, g: Group, d: Delivery, now: number): void {
    if (topic.dropExpiredInFlight(g, d, now)) return;
    const retry = d.retryCount + 1;
    const reason = "visibility timeout";
    topic.counters.requeued++;
    let done: Promise<unknown>;
    if (exhausted(topic, retry)) {
      done = this.#deadLetter(topic, g, d, this.getTopic(dlqName(topic.name)), retry, reason, now);
    } else {
      done = topic.commit({
        type: RecordType.Requeue,
        seq: topic.nextSeq(),
        group: g.name,
        id: d.msg.id,
        retryCount: retry,
        dueAt: 0,
        reason,
      }, now);
    }
    done.catch((e) => this.log.error("lease end not recorded", { topic: topic.name, error: e }));
  }

  #maybeCompact(topic: Topic, now: number): void {
    if (this.#compacting.has(topic) || !this.#oversized(topic)) return;
    const retryAt = this.#compactAgainAt.get(topic);
    // Below the size floor only a topic whose last compaction left it oversized, once a second.
    const due = retryAt !== undefined
      ? now >= retryAt
      : topic.wal.bytes >= this.config.compactMinBytes;
    if (!due) return;
    this.#compact(topic).catch((e) =>
      this.log.error("compaction failed", { topic: topic.name, error: e })
    );
  }

  /** Whether a topic's file is more than BROKER_COMPACT_RATIO × what it still holds. */
  #oversized(topic: Topic): boolean {
    return topic.wal.bytes > this.config.compactRatio * Math.max(topic.liveBytes, 1);
  }

  /**
   * Rewrites a topic's file. Records appended while it runs are kept after the snapshot; when
   * they leave the file out of proportion (a batch ack during a drain), the topic is compacted
   * again a second later, even below BROKER_COMPACT_MIN_BYTES, until it is in proportion.
   */
  async #compact(topic: Topic): Promise<void> {
    this.#compacting.add(topic);
    const before = topic.wal.bytes;
    const t0 = performance.now();
    try {
      await topic.wal.compact(() => topic.snapshot(this.now()));
      topic.relocate();
      this.log.debug("compacted", {
        topic: topic.name,
        bytes_before: before,
        bytes_after: topic.wal.bytes,
        duration_ms: Math.round(performance.now() - t0),
      });
    } finally {
      this.#compacting.delete(topic);
      if (this.#oversized(topic)) this.#compactAgainAt.set(topic, this.now() + COMPACT_RETRY_MS);
      else this.#compactAgainAt.delete(topic);
    }
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  #gate(): void {
    if (this.draining) {
      throw new BrokerError("draining", "The broker is draining; no new work is accepted");
    }
  }

  /** Stops accepting work, answers parked consumers, and flushes every WAL. */
  async drain(): Promise<void> {
    this.draining = true;
    for (const t of this.topics.values()) this.#release(t);
    await Promise.allSettled([...this.topics.values()].map((t) => t.wal.barrier()));
  }

  /** Flushes and closes every WAL and stops the timer. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.draining = true;
    if (this.#ticker !== undefined) clearInterval(this.#ticker);
    for (const t of this.topics.values()) this.#release(t);
    await Promise.allSettled([...this.#deleting.values()]);
    await Promise.allSettled([...this.topics.values()].map((t) => t.wal.close()));
  }

  /** Replays every `<topic>.wal` in the data dir. */
  async #recover(): Promise<void> {
    const dir = this.config.dataDir;
    if (dir === ":memory:") return;
    const t0 = performance.now();
    await Deno.mkdir(dir, { recursive: true });
    const names: string[] = [];
    for await (const e of Deno.readDir(dir)) {
      if (!e.isFile) continue;
      if (e.name.endsWith(".wal.compact") || e.name.endsWith(".wal.salvage")) {
        // An interrupted compaction or salvage: the .wal it was to replace is intact.
        await Deno.remove(`${dir}/${e.name}`);
        continue;
      }
      if (!e.name.endsWith(".wal")) continue;
      const name = e.name.slice(0, -4);
      try {
        checkName(name, "topic");
      } catch {
        this.log.warn("ignoring a WAL file with an invalid topic name", { file: e.name });
        continue;
      }
      names.push(name);
    }
    names.sort();
    const now = this.now();
    let records = 0, messages = 0;
    for (const name of names) {
      const topic = new Topic(
        name,
        {
          policy: "reject",
          retainMs: 0,
          visibilityMs: 0,
          maxMessages: 0,
          maxBytes: 0,
          createdAt: now,
        },
        new MemoryWal(),
        this.memory,
        this.#diskPayloadMin,
      );
      const path = `${dir}/${name}.wal`;
      // Large payloads stay in the file; this reader keeps reading them, even if replay cuts
      // damage out of the file (it reads the file as replay saw it) until a compaction moves them.
      const replayed = await PayloadFile.open(path);
      const result = await replayFile(path, (r, size, at) => {
        let disk: PayloadLocation | undefined;
        if (r.type === RecordType.Publish) {
          if (r.payload.length >= topic.diskPayloadMin) {
            disk = { file: replayed, offset: at + size - r.payload.length };
          } else {
            r.payload = copyPayload(r.payload);
          }
          r.headers = internHeaders(r.headers);
        }
        topic.apply(r, now, size, disk);
      }, this.log);
      records += result.records;
      if (result.validBytes === 0) {
        // Empty or header-less: start the file afresh.
        await Deno.remove(path);
      }
      topic.wal = this.#openWal(name, result.validBytes, replayed);
      messages += topic.messages.size;
      this.topics.set(name, topic);
    }
    this.recovery = {
      topics: names.length,
      messages,
      records,
      duration_ms: Math.round((performance.now() - t0) * 10) / 10,
      held_bytes: this.memory.held,
    };
    if (this.memory.held > this.memory.budget) {
      this.log.warn("the log holds more than BROKER_MAX_MEMORY; publishes get 429 until drained", {
        held_bytes: this.memory.held,
        budget_bytes: this.memory.budget,
      });
    }
  }

  /** What start-up replay found, for the start-up log line. */
  recovery = { topics: 0, messages: 0, records: 0, duration_ms: 0, held_bytes: 0 };

  // ---- listing -----------------------------------------------------------------------------

  /** Oldest message age, in seconds, of what a group of `topic` holds. */
  oldestAgeSeconds(topic: Topic, g: Group, now: number): number {
    const ts = topic.oldestTimestamp(g);
    return ts === undefined ? 0 : Math.max(0, (now - ts) / 1000);
  }
}

function checkPayload(topic: string, payload: Uint8Array): void {
  if (payload.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${topic}": the body is empty`);
  }
  if (payload.length > MAX_PAYLOAD_BYTES) {
    throw new BrokerError(
      "payload_too_large",
      `Cannot publish to "${topic}": ${payload.length} bytes is more than ${MAX_PAYLOAD_BYTES}`,
    );
  }
}

function addCounters(into: TopicCounters, from: TopicCounters): void {
  for (const k of Object.keys(into) as (keyof TopicCounters)[]) into[k] += from[k];
}

/** A filter predicate over payloads (CONTRACT "Filters"). */
export function filterFn(key: string, value: string | undefined): (p: Uint8Array) => boolean {
  return (p) => matchesFilter(p, key, value);
}
