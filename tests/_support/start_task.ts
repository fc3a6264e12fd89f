/**
 * The `start` task of deno.json read apart, so benchmarks and soak runs start the broker the
 * way `deno task start` does: its leading `NAME=value` words (the malloc settings) and its
 * `--v8-flags=…`.
 */

/** The environment and V8 flags of the `start` task. */
export function startTask(): { env: Record<string, string>; v8Flags: string[] } {
  const url = new URL("../../deno.json", import.meta.url);
  const task = String(JSON.parse(Deno.readTextFileSync(url)).tasks?.start ?? "");
  const words = task.split(" ").filter(Boolean);
  const env: Record<string, string> = {};
  for (const w of words) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(w);
    if (!m) break;
    env[m[1]!] = m[2]!;
  }
  return { env, v8Flags: words.filter((w) => w.startsWith("--v8-flags=")) };
}

/**
 * The start task as environment for a spawned `main.ts`: its `NAME=value` words, and its V8
 * flags as DENO_V8_FLAGS (the same as `--v8-flags`, without touching the child's argv).
 */
export function startTaskEnv(): Record<string, string> {
  const { env, v8Flags } = startTask();
  const v8 = v8Flags.map((f) => f.slice("--v8-flags=".length)).join(",");
  return v8 ? { ...env, DENO_V8_FLAGS: v8 } : env;
}
