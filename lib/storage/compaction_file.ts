/**
 * @module The file a compaction writes, `<topic>.wal.compact`: a header, the snapshot's frames,
 * then the frames appended while they were written, synced and renamed over the log. What to
 * snapshot and when is compactor.ts; holding appends and swapping the writer is file_wal.ts.
 */

import { concat } from "../bytes.ts";
import { PayloadFile } from "../memory/payload_file.ts";
import { FILE_MODE } from "./data_dir_modes.ts";
import { fileHeader } from "./record.ts";
import { writeAll } from "./wal.ts";

/** A compaction's new file while it is written, before it becomes the log. */
export class CompactionFile {
  /** Bytes written so far: the new file's length. */
  size = 0;

  private constructor(readonly path: string, readonly file: Deno.FsFile) {}

  /** Creates (or empties) the file at `path`, 0600: the log it becomes keeps that mode. */
  static async create(path: string): Promise<CompactionFile> {
    return new CompactionFile(
      path,
      await Deno.open(path, { write: true, create: true, truncate: true, mode: FILE_MODE }),
    );
  }

  /**
   * Writes the file header and the snapshot's chunks, `first` being the chunk its iteration
   * began with, then syncs them. Each later chunk is encoded only after the previous one is
   * written: requests run between.
   */
  async writeSnapshot(
    first: IteratorResult<Uint8Array[]>,
    chunks: Iterator<Uint8Array[]>,
  ): Promise<void> {
    await this.#write([fileHeader(), ...(first.done ? [] : first.value)]);
    for (let next = chunks.next(); !next.done; next = chunks.next()) await this.#write(next.value);
    await this.file.syncData();
  }

  /** Writes `frames` after what is there with one write, then syncs them. */
  async writeSynced(frames: Uint8Array[]): Promise<void> {
    await this.#write(frames);
    await this.file.syncData();
  }

  /** A payload reader of this file, which follows it across the rename. */
  reader(): PayloadFile {
    return PayloadFile.open(this.path);
  }

  /** Renames the file over the log at `walPath`: from here on, it is the log. */
  renameOver(walPath: string): Promise<void> {
    return Deno.rename(this.path, walPath);
  }

  async #write(frames: Uint8Array[]): Promise<void> {
    const bytes = frames.reduce((n, f) => n + f.length, 0);
    await writeAll(this.file, concat(frames, bytes));
    this.size += bytes;
  }
}
