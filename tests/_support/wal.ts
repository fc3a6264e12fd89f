/**
 * A real WAL wrapped for a test: every call goes to the inner FileWal unless a subclass
 * overrides it (to hold durability, watch compactions, …). Storage stays real.
 */

import type { PayloadLocation } from "../../lib/message.ts";
import type { FileWal } from "../../lib/storage/file_wal.ts";
import type { Appended, Wal } from "../../lib/storage/wal.ts";
import type { WalRecord } from "../../lib/storage/record.ts";

export class DelegatingWal implements Wal {
  constructor(readonly inner: FileWal) {}
  get bytes(): number {
    return this.inner.bytes;
  }
  get failed(): Error | undefined {
    return this.inner.failed;
  }
  get generation(): number {
    return this.inner.generation;
  }
  append(record: WalRecord, after?: Promise<unknown>): Appended {
    return this.inner.append(record, after);
  }
  compact(snapshot: () => Iterable<Uint8Array[]>): Promise<void> {
    return this.inner.compact(snapshot);
  }
  barrier(): Promise<void> {
    return this.inner.barrier();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  remove(): Promise<void> {
    return this.inner.remove();
  }
  locate(generation: number, offset: number): PayloadLocation | undefined {
    return this.inner.locate(generation, offset);
  }
  rebase(at: PayloadLocation): PayloadLocation | undefined {
    return this.inner.rebase(at);
  }
  releaseRetired(): void {
    this.inner.releaseRetired();
  }
}
