/** @module The broker's default choice of WAL for each topic. */

import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import { FileWal } from "./file_wal.ts";
import { MemoryWal } from "./memory_wal.ts";
import type { OpenWal } from "./wal.ts";

/** The broker's default WAL for each topic: a file in the data dir, or nothing with `:memory:`. */
export function defaultOpenWal(
  config: Pick<Config, "dataDir" | "fsync">,
  log: Logger,
  onFsync?: (seconds: number) => void,
  onNoSpace?: () => void,
): OpenWal {
  if (config.dataDir === ":memory:") return (_name, init) => new MemoryWal(init.onDurable);
  return (name, init) =>
    new FileWal(`${config.dataDir}/${name}.wal`, config.dataDir, init.size, {
      fsync: config.fsync,
      log,
      onFsync,
      onNoSpace,
      after: init.after,
      replayed: init.replayed,
      onDurable: init.onDurable,
    });
}
