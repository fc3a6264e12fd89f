/**
 * @module The topics of a broker by name: lookup, creation within BROKER_MAX_TOPICS (a topic's
 * `.dlq` is free while its topic exists), each with its WAL from the broker's factory, and
 * deletion, which a later topic of the same name waits for before it creates its file.
 */

import { type Config, DLQ_SUFFIX } from "./config.ts";
import { BrokerError } from "./errors.ts";
import type { MemoryBudget } from "./memory/budget.ts";
import { checkName } from "./names.ts";
import { FIGURE_TOPICS, owns, type Shard, shardOf, type SharedFigures } from "./shard.ts";
import { Topic, type TopicOptions, topicSettings } from "./topic.ts";
import type { Wal, WalInit } from "./storage/wal.ts";
import { type MetaRecord, RecordType } from "./storage/record.ts";

/** Every topic of the broker. */
export class Registry {
  readonly #topics = new Map<string, Topic>();
  /** Topics being deleted, by name, until their file is gone. */
  readonly #deleting = new Map<string, Promise<void>>();

  constructor(
    private readonly config: Config,
    private readonly memory: MemoryBudget,
    private readonly now: () => number,
    /** Opens a topic's WAL (the broker's factory, its records feeding the subscribers). */
    readonly openWal: (name: string, init: WalInit) => Wal,
    /** Hears each topic's deadlines that are earlier than any it had (Topic.wake). */
    private readonly wake: (at: number) => void = () => {},
    /** With several workers: which topics are this worker's, and the others' topic counts. */
    private readonly shard?: { shard: Shard; figures: SharedFigures },
  ) {}

  /** Payloads this large or larger stay in the WAL file; with no file, every one in memory. */
  get diskPayloadMin(): number {
    return this.config.dataDir === ":memory:" ? Infinity : this.config.diskPayloadMinBytes;
  }

  find(name: string): Topic | undefined {
    return this.#topics.get(name);
  }

  /** The topic, created with default settings when missing. */
  get(name: string): Topic {
    return this.#topics.get(name) ?? this.create(name, {});
  }

  has(name: string): boolean {
    return this.#topics.has(name);
  }

  /** Every topic, in no particular order. */
  values(): IterableIterator<Topic> {
    return this.#topics.values();
  }

  /** Adds topics replayed at start-up. */
  add(topics: Iterable<Topic>): void {
    for (const topic of topics) {
      topic.wake = this.wake;
      this.#topics.set(topic.name, topic);
    }
    this.#publishCount(); // once: counting walks every topic
  }

  /** The topics here that count toward BROKER_MAX_TOPICS. */
  #count(): number {
    let n = 0;
    for (const t of this.#topics.keys()) if (this.#countsTowardLimit(t)) n++;
    return n;
  }

  /** Tells the other workers how many topics count here. */
  #publishCount(): void {
    this.shard?.figures.set(FIGURE_TOPICS, this.#count());
  }

  /**
   * Every topic counts toward BROKER_MAX_TOPICS except the dead-letter queue of a topic that
   * exists: dead-lettering must always be able to create it, and it never outnumbers its topics.
   */
  #countsTowardLimit(name: string): boolean {
    return !(name.endsWith(DLQ_SUFFIX) && this.#topics.has(name.slice(0, -DLQ_SUFFIX.length)));
  }

  /** Creates a topic and writes its META record; 403 past BROKER_MAX_TOPICS. */
  create(name: string, opts: TopicOptions): Topic {
    checkName(name, "topic");
    if (this.shard && !owns(this.shard.shard, name)) {
      // The HTTP layer hands every request to the worker that owns its topic (routes/shards.ts).
      throw new Error(`topic "${name}" belongs to worker ${shardOf(name, this.shard.shard.count)}`);
    }
    if (this.#countsTowardLimit(name)) {
      const n = this.#count() + (this.shard?.figures.others(FIGURE_TOPICS) ?? 0);
      if (n >= this.config.maxTopics) {
        throw new BrokerError(
          "topic_limit_reached",
          `Cannot create topic "${name}": the broker holds ${n} topics (BROKER_MAX_TOPICS=${this.config.maxTopics})`,
        );
      }
    }
    const now = this.now();
    const settings = topicSettings(opts, now);
    const wal = this.openWal(name, { size: 0, after: this.#deleting.get(name) });
    const topic = new Topic(name, settings, wal, this.memory, this.diskPayloadMin);
    topic.wake = this.wake;
    this.#topics.set(name, topic);
    topic.commit({ type: RecordType.Meta, seq: topic.nextSeq(), ...settings, goneSeq: 0 }, now)
      .catch(() => {}); // a failed write marks the WAL failed; later writes report it
    this.#publishCount();
    return topic;
  }

  /**
   * Creates a topic as a leader's META record describes it (a follower applying the stream),
   * whatever BROKER_MAX_TOPICS says: the leader checked it. Resolves once the META is durable.
   */
  adopt(name: string, meta: MetaRecord): { topic: Topic; durable: Promise<void> } {
    const { type: _t, seq: _s, goneSeq: _g, ...settings } = meta;
    const wal = this.openWal(name, { size: 0, after: this.#deleting.get(name) });
    const topic = new Topic(name, settings, wal, this.memory, this.diskPayloadMin);
    topic.wake = this.wake;
    this.#topics.set(name, topic);
    this.#publishCount();
    return { topic, durable: topic.commit(meta, this.now()) };
  }

  /**
   * Takes a topic out and removes its file; a topic of the same name created meanwhile waits
   * for the removal before it writes. Resolves once the file is gone.
   */
  delete(topic: Topic): Promise<void> {
    const name = topic.name;
    this.#topics.delete(name);
    this.#publishCount();
    const gone = topic.wal.remove();
    const guard = gone.catch(() => {}).finally(() => {
      if (this.#deleting.get(name) === guard) this.#deleting.delete(name);
    });
    this.#deleting.set(name, guard);
    return gone;
  }

  /** Waits for deletions under way, then closes every WAL. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#deleting.values()]);
    await Promise.allSettled([...this.#topics.values()].map((t) => t.wal.close()));
  }
}
