/**
 * @module Who may read the data directory (docs/security.md, "Data at rest"). It holds every
 * payload and each webhook's sealed secret, so the broker makes it 0700 and every file it writes
 * there 0600, setting the mode as it creates each one (a rename keeps the mode of the file
 * renamed), whatever the umask. A directory that exists already keeps its mode (the operator may
 * have given a backup group read access on purpose): a wider one gets a warning at start-up. The
 * broker's own files that an older version left readable to others are narrowed to 0600 then.
 */

import type { Logger } from "../log.ts";

/** Mode of a data directory the broker creates. */
export const DIR_MODE = 0o700;
/** Mode of every file the broker creates in the data directory. */
export const FILE_MODE = 0o600;
/** The group and other bits: what must be clear for only the broker's user to read. */
const OTHERS = 0o077;
/** Names of the files the broker writes in its data directory, and only those. */
const OWN_FILE =
  /^(ferry\.lock|node_id|webhook\.key(\.[0-9a-f-]{36})?|.+\.wal(\.compact|\.salvage|\.cut-\d+)?)$/;

/** Creates `dir` and any missing parents with DIR_MODE; nothing happens when it exists. */
export function makeDataDir(dir: string): Promise<void> {
  return Deno.mkdir(dir, { recursive: true, mode: DIR_MODE });
}

/** Synchronous makeDataDir(), for start-up's synchronous scan. */
export function makeDataDirSync(dir: string): void {
  Deno.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
}

/**
 * At start-up, with the data dir locked: warns when the directory lets others in, and narrows
 * to FILE_MODE the broker's own files that do (written by a version before modes were set).
 */
export async function checkDataDirModes(dir: string, log: Logger): Promise<void> {
  const mode = (await Deno.stat(dir)).mode;
  if (mode !== null && (mode & OTHERS) !== 0) {
    log.warn("data directory is readable by other users", {
      data_dir: dir,
      mode: octal(mode),
      fix: `chmod 700 ${dir}`,
    });
  }
  const narrowed: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (!e.isFile || !OWN_FILE.test(e.name)) continue;
    const path = `${dir}/${e.name}`;
    const fileMode = (await Deno.stat(path)).mode;
    if (fileMode === null || (fileMode & OTHERS) === 0) continue;
    await Deno.chmod(path, FILE_MODE);
    narrowed.push(e.name);
  }
  if (narrowed.length) {
    log.info("data files narrowed to mode 0600", { data_dir: dir, files: narrowed.length });
  }
}

function octal(mode: number): string {
  return "0" + (mode & 0o777).toString(8);
}
