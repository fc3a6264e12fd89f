/** @module The WAL of a broker without a disk (BROKER_DATA_DIR=:memory:): it keeps nothing. */

import { encodeRecord, frameSize, type WalRecord } from "./record.ts";
import type { Appended, DurableHook, Wal } from "./wal.ts";

const RESOLVED: Promise<void> = Promise.resolve();

/** A WAL that keeps nothing, for BROKER_DATA_DIR=:memory:. */
export class MemoryWal implements Wal {
  /** Records appended in this turn, heard as durable in a microtask (there is no disk). */
  #pending: WalRecord[] = [];
  constructor(private readonly onDurable?: DurableHook) {}
  bytes = 0;
  failed = undefined;
  generation = 0;
  locate(): undefined {
    return undefined;
  }
  rebase(): undefined {
    return undefined;
  }
  releaseRetired(): void {}
  append(record: WalRecord, _after?: Promise<unknown>, frame?: boolean): Appended {
    if (this.onDurable) {
      if (this.#pending.length === 0) queueMicrotask(() => this.#heard());
      this.#pending.push(record);
    }
    // Sized as its frame would be, for the topic's accounting; nothing is encoded (no disk).
    return {
      durable: RESOLVED,
      size: frameSize(record),
      payloadOffset: undefined,
      frame: frame ? encodeRecord(record) : undefined,
    };
  }
  #heard(): void {
    const records = this.#pending;
    this.#pending = [];
    this.onDurable!(records);
  }
  barrier(): Promise<void> {
    return RESOLVED;
  }
  compact(): Promise<void> {
    return RESOLVED;
  }
  close(): Promise<void> {
    return RESOLVED;
  }
  remove(): Promise<void> {
    return RESOLVED;
  }
}
