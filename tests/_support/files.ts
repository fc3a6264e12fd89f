/** Test support: a broker's files on disk, as the tests look at them from outside. */

/** The WAL file of `topic` under `dataDir`. */
export function walPath(dataDir: string, topic: string): string {
  return `${dataDir}/${topic}.wal`;
}

/** Size of a file, or undefined when it does not exist. */
export async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** True when the path exists. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
