/**
 * @module Everything the harness starts or creates, so that it all goes away at exit or on
 * SIGINT: child processes (brokers, wrk, clients) and temporary directories.
 */

/** The harness's child processes still running (cpu.ts reads their CPU). */
export const live = new Set<Deno.ChildProcess>();
/** Temporary directories not removed yet. */
export const tempDirs = new Set<string>();

/** Registers a child process until it exits. */
export function track(p: Deno.ChildProcess): Deno.ChildProcess {
  live.add(p);
  p.status.finally(() => live.delete(p));
  return p;
}

/** Kills every live child and removes every temporary directory. */
export async function cleanup(): Promise<void> {
  for (const p of live) {
    try {
      p.kill("SIGKILL");
    } catch { /* gone */ }
  }
  for (const d of tempDirs) await Deno.remove(d, { recursive: true }).catch(() => {});
}

/** A fresh temporary directory, removed at exit unless removeDir() takes it first. */
export async function tempDir(prefix: string): Promise<string> {
  const d = await Deno.makeTempDir({ prefix });
  tempDirs.add(d);
  return d;
}

/** Removes a directory made by tempDir(). */
export async function removeDir(d: string): Promise<void> {
  await Deno.remove(d, { recursive: true }).catch(() => {});
  tempDirs.delete(d);
}
