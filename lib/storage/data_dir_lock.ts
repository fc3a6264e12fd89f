/**
 * @module One broker per data directory. Two brokers appending to the same WAL files corrupt
 * them, so a broker holds an exclusive lock on `<data dir>/ferry.lock` from before it reads
 * anything in the directory until it closes. The lock is flock(2)'s (Deno.FsFile.lock): the
 * kernel drops it when the process dies, even by SIGKILL, so no stale lock is left behind; and it
 * belongs to the open file, so a second broker in the same process is refused too.
 */

import { type Logger, silentLogger } from "../log.ts";
import { checkDataDirModes, FILE_MODE, makeDataDir } from "./data_dir_modes.ts";

/** The lock file's name; the WAL scan reads only `*.wal` files, so it is never a topic. */
export const LOCK_FILE = "ferry.lock";

/** Another broker holds the data directory; `pid` is what it wrote into the lock file. */
export class DataDirInUseError extends Error {
  constructor(readonly dir: string, readonly pid: number | undefined) {
    super(
      `data directory "${dir}" is in use by another broker (${
        pid === undefined ? "pid unknown" : `pid ${pid}`
      }); stop it or set BROKER_DATA_DIR to another directory`,
    );
    this.name = "DataDirInUseError";
  }
}

/** The held lock of a data directory; `release()` gives it up. */
export class DataDirLock {
  private constructor(readonly dir: string, readonly file: Deno.FsFile) {}

  /**
   * Creates `dir` if needed (0700) and locks it, writes this process's pid into the lock file,
   * then checks the directory's modes (data_dir_modes.ts; its warning goes to `log`). Throws
   * DataDirInUseError, having read nothing but the lock file, when another broker holds it.
   */
  static async acquire(dir: string, log: Logger = silentLogger): Promise<DataDirLock> {
    await makeDataDir(dir);
    // Not truncated on open: the holder's pid stays readable for the refusal's message.
    const file = await Deno.open(`${dir}/${LOCK_FILE}`, {
      read: true,
      write: true,
      create: true,
      mode: FILE_MODE,
    });
    let locked = false;
    try {
      locked = await file.tryLock(true);
    } finally {
      if (!locked) file.close();
    }
    if (!locked) throw new DataDirInUseError(await Deno.realPath(dir), await holderPid(dir));
    await file.truncate(0);
    await file.write(new TextEncoder().encode(`${Deno.pid}\n`));
    const lock = new DataDirLock(dir, file);
    try {
      await checkDataDirModes(dir, log);
    } catch (e) {
      await lock.release();
      throw e;
    }
    return lock;
  }

  /** Empties the lock file (its pid is no longer true) and unlocks it. Safe to call twice. */
  async release(): Promise<void> {
    try {
      await this.file.truncate(0);
    } catch { /* closed already */ }
    try {
      this.file.close(); // closing the last descriptor of the open file drops the flock
    } catch { /* closed already */ }
  }
}

/** The pid in the lock file, if one is there yet (the holder writes it right after locking). */
async function holderPid(dir: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(`${dir}/${LOCK_FILE}`).catch(() => "");
  return /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}
