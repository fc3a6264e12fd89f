/**
 * @module Where a WAL's payloads are across its compactions. A payload offset is an offset in
 * the file of one generation; a compaction starts the next one, moving the frames appended while
 * it ran to the new file's end. This keeps the reader of the current file, the mapping of the
 * last swap, and the replaced files until no message points into them.
 */

import type { PayloadLocation } from "../message.ts";
import type { PayloadFile } from "../memory/payload_file.ts";

/** What the last compaction did: frames appended during it moved by snapshotEnd - captureStart. */
interface Swap {
  /** The generation it replaced. */
  generation: number;
  /** That generation's reader. */
  file: PayloadFile | undefined;
  /** The old file's length when the snapshot was taken: frames from here on were captured. */
  captureStart: number;
  /** Where the captured frames start in the new file. */
  snapshotEnd: number;
}

/** The payload readers of one WAL file across its generations (the count itself is the WAL's). */
export class PayloadGenerations {
  /** The reader of the current file, once it is open. */
  current: PayloadFile | undefined;
  /** Readers of files a compaction replaced (and of replay's), closed by releaseRetired(). */
  #retired: PayloadFile[] = [];
  /** Writers of files a compaction replaced, kept open until releaseRetired() empties them. */
  #oldWriters: Deno.FsFile[] = [];
  /** The old writers being emptied and closed (see releaseRetired). */
  #releasing: Promise<void> = Promise.resolve();
  #lastSwap: Swap | undefined;

  /** `replayed`: the reader replay used, retired from the start. */
  constructor(replayed?: PayloadFile) {
    if (replayed) this.#retired.push(replayed);
  }

  /**
   * A compaction replaced generation `replaced` with the file `next` reads: frames from
   * `captureStart` of the old file now sit from `snapshotEnd` of the new one.
   */
  swap(replaced: number, next: PayloadFile, captureStart: number, snapshotEnd: number): void {
    if (this.current) this.#retired.push(this.current);
    this.#lastSwap = { generation: replaced, file: this.current, captureStart, snapshotEnd };
    this.current = next;
  }

  /** Keeps a replaced file's writer open until releaseRetired() empties and closes it. */
  retireWriter(writer: Deno.FsFile): void {
    this.#oldWriters.push(writer);
  }

  /** See Wal.locate; `currentGeneration` is the WAL's generation now. */
  locate(
    generation: number,
    offset: number,
    currentGeneration: number,
  ): PayloadLocation | undefined {
    const file = this.current;
    if (!file) return undefined;
    if (generation === currentGeneration) return { file, offset };
    const s = this.#lastSwap;
    if (s && generation === s.generation && offset >= s.captureStart) {
      return { file, offset: offset - s.captureStart + s.snapshotEnd };
    }
    return undefined;
  }

  /** See Wal.rebase. */
  rebase(at: PayloadLocation): PayloadLocation | undefined {
    const file = this.current;
    const s = this.#lastSwap;
    if (!file || !s || at.file !== s.file || at.offset < s.captureStart) return undefined;
    return { file, offset: at.offset - s.captureStart + s.snapshotEnd };
  }

  /**
   * Closes the readers of replaced files, then empties each replaced file in Deno's blocking pool
   * before closing its writer: the last descriptor of an unlinked file frees its blocks as it
   * closes, which for a file of 100 MiB took milliseconds of the event loop's thread (6.5 % of a
   * drain's busy time, profiled). The readers go first, so the writer is the last descriptor.
   */
  releaseRetired(): void {
    for (const f of this.#retired) f.close();
    this.#retired = [];
    for (const w of this.#oldWriters) {
      // Best effort: a failure leaves the blocks to be freed by the close, as before.
      const emptied = w.truncate(0).catch(() => {}).then(() => w.close()).catch(() => {});
      // Resolves to nothing: each compaction's value must not hold the previous one's.
      this.#releasing = Promise.all([this.#releasing, emptied]).then(() => {});
    }
    this.#oldWriters = [];
  }

  /** Closes every reader; resolves once the replaced files are emptied and closed. */
  async close(): Promise<void> {
    this.releaseRetired();
    this.current?.close();
    await this.#releasing;
  }
}
