/**
 * @module A topic's WAL in cluster mode: the node's own WAL, whose appends and removal a leader
 * also ships to its followers. An append's `durable` then resolves once it is on the leader's
 * disk and a quorum of followers has it too; its size and payload offset are the local file's.
 * Compaction stays local (each node compacts its own files), and a follower's appends (applying
 * the stream) are not shipped: the replicator is active only while the node leads. barrier()
 * waits for the quorum too while leading; close() waits for the local disk only.
 */

import type { Appended, OpenWal, Wal } from "../storage/wal.ts";
import { encodeRecord, type WalRecord } from "../storage/record.ts";
import type { Replicator } from "./replicator.ts";

/** Wraps `open` so that every topic's WAL ships through `replicator`. */
export function replicatedOpenWal(open: OpenWal, replicator: Replicator): OpenWal {
  return (topic, init) => new ReplicatedWal(topic, open(topic, init), replicator);
}

/** A topic's WAL that also ships each append through the replicator while this node leads. */
export class ReplicatedWal implements Wal {
  constructor(
    readonly topic: string,
    readonly inner: Wal,
    readonly replicator: Replicator,
  ) {}

  get bytes() {
    return this.inner.bytes;
  }
  get failed() {
    return this.inner.failed;
  }
  get generation() {
    return this.inner.generation;
  }

  append(record: WalRecord, after?: Promise<unknown>, frame?: boolean): Appended {
    const active = this.replicator.active;
    const appended = this.inner.append(record, after, active || frame);
    if (!active) return appended;
    const local = appended.durable;
    // The frame the file got, encoded once (a refused append has none; its `durable` rejects).
    const shipped = this.replicator.ship({
      kind: "record",
      topic: this.topic,
      frame: appended.frame ?? encodeRecord(record),
    });
    if (!frame) appended.frame = undefined;
    // The records of one batch share both promises: combine them once per batch.
    if (local !== this.#local || shipped !== this.#shipped) {
      this.#local = local;
      this.#shipped = shipped;
      this.#both = Promise.all([local, shipped]).then(() => {});
    }
    // The result is the caller's own: reusing it costs no second object per append.
    appended.durable = this.#both!;
    return appended;
  }
  #local: Promise<void> | undefined;
  #shipped: Promise<void> | undefined;
  #both: Promise<void> | undefined;

  barrier(): Promise<void> {
    const local = this.inner.barrier();
    // Records ship in order: the quorum of the last one shipped covers every earlier one.
    const shipped = this.replicator.active ? this.#shipped : undefined;
    return shipped ? Promise.all([local, shipped]).then(() => {}) : local;
  }
  compact(snapshot: () => Iterable<Uint8Array[]>): Promise<void> {
    return this.inner.compact(snapshot);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  async remove(): Promise<void> {
    const shipped = this.replicator.active
      ? this.replicator.ship({ kind: "delete", topic: this.topic })
      : undefined;
    await this.inner.remove();
    await shipped;
  }
  locate(generation: number, offset: number) {
    return this.inner.locate(generation, offset);
  }
  rebase(at: Parameters<Wal["rebase"]>[0]) {
    return this.inner.rebase(at);
  }
  releaseRetired(): void {
    this.inner.releaseRetired();
  }
}
