/**
 * Test support: a small real file system to fill (tmpfs, which a test running as root may
 * mount), for what only a full disk shows (ENOSPC, the disk alarm).
 */

async function run(cmd: string, args: string[]): Promise<boolean> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output();
    return out.success;
  } catch {
    return false;
  }
}

/** Mounts a tmpfs of `size` (`6m`) on a fresh directory; undefined when this machine forbids it. */
export async function mountTmpfs(size: string): Promise<string | undefined> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-disk-" });
  if (await run("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir])) return dir;
  await Deno.remove(dir);
  return undefined;
}

/** Unmounts and removes what mountTmpfs made. */
export async function unmountTmpfs(dir: string): Promise<void> {
  if (await run("umount", [dir])) await Deno.remove(dir, { recursive: true });
  else console.error(`could not unmount ${dir}`);
}

/** Whether a tmpfs can be mounted here; tests that need one are ignored otherwise. */
export const TMPFS_MOUNTS = await (async () => {
  const probe = await mountTmpfs("1m");
  if (probe) await unmountTmpfs(probe);
  return probe !== undefined;
})();

/** Fills the file system of `dir` with `path` until no byte is left; returns its size. */
export async function fillUp(path: string): Promise<number> {
  const file = await Deno.open(path, { write: true, create: true });
  const chunk = new Uint8Array(4096);
  let size = 0;
  try {
    for (;;) size += await file.write(chunk);
  } catch (e) {
    if (!/\(os error 28\)/.test(String(e))) throw e;
  } finally {
    file.close();
  }
  return size;
}
