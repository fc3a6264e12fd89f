/**
 * @module The follower's side of replication: it applies the leader's stream to its own topics
 * through `Topic.commit` (its own WAL, then the same `apply` as replay) and acks each message's
 * index once everything up to it is on disk. A snapshot replaces what the node held: topics the
 * snapshot names start over from their META, the others are dropped. So a node that led before
 * and comes back loses what it wrote that the cluster never acknowledged.
 */

import type { Logger } from "../log.ts";
import { normalise } from "../storage/recovery.ts";
import type { Topic } from "../topic.ts";
import { type MetaRecord, RecordType } from "../storage/record.ts";
import { decodeMessage, frameRecord } from "./replica_stream.ts";

/** What the follower needs of the broker. */
export interface ReplicaTarget {
  findTopic(name: string): Topic | undefined;
  eachTopic(): Iterable<Topic>;
  dropTopic(topic: Topic): Promise<void>;
  adoptTopic(name: string, meta: MetaRecord): { topic: Topic; durable: Promise<void> };
  now(): number;
}

/** Applies one leader's stream, in order. */
export class Follower {
  #inSnapshot = false;
  readonly #snapshotTopics = new Set<string>();
  #chain: Promise<unknown> = Promise.resolve();
  #acked = 0;

  constructor(
    readonly target: ReplicaTarget,
    readonly log: Logger,
    /** Hears the first write that failed: the connection must end, the leader pick another. */
    readonly onBroken: (e: Error) => void = () => {},
  ) {}
  #broken = false;

  /**
   * Applies a message and calls `ack(index)` once it and every earlier one are durable. Throws
   * on a malformed message (the connection must then end: the follower starts over).
   */
  apply(msg: Uint8Array, ack: (index: number) => void): void {
    const { index, entries } = decodeMessage(msg);
    const { target } = this;
    const now = target.now();
    const durables: Promise<unknown>[] = [this.#chain];
    for (const e of entries) {
      if (e.kind === "snapshot-begin") {
        this.#inSnapshot = true;
        this.#snapshotTopics.clear();
      } else if (e.kind === "snapshot-end") {
        this.#inSnapshot = false;
        for (const t of [...target.eachTopic()]) {
          if (!this.#snapshotTopics.has(t.name)) durables.push(target.dropTopic(t));
        }
        this.log.info("cluster: snapshot applied", { topics: this.#snapshotTopics.size });
      } else if (e.kind === "delete") {
        const t = target.findTopic(e.topic);
        if (t) durables.push(target.dropTopic(t));
      } else {
        const r = frameRecord(e.frame);
        normalise(r, Infinity); // the payload moves out of the message's buffer
        let topic = target.findTopic(e.topic);
        if (this.#inSnapshot && !this.#snapshotTopics.has(e.topic)) {
          this.#snapshotTopics.add(e.topic);
          if (topic) durables.push(target.dropTopic(topic));
          topic = undefined;
        }
        if (!topic) {
          if (r.type !== RecordType.Meta) {
            throw new Error(`replicated record for unknown topic "${e.topic}" is not its META`);
          }
          durables.push(target.adoptTopic(e.topic, r).durable);
          continue;
        }
        durables.push(topic.commit(r, now));
      }
    }
    this.#chain = Promise.all(durables).then(() => {
      if (index > this.#acked) {
        this.#acked = index;
        ack(index);
      }
    });
    this.#chain.catch((e) => {
      // A failed write marks its WAL failed (/healthz reports it); this node acks nothing more.
      if (this.#broken) return;
      this.#broken = true;
      this.onBroken(e as Error);
    });
  }
}
