/**
 * The `start` task of deno.json read apart, so tests, benchmarks and soak runs start the broker
 * the way `deno task start` does: its leading `NAME=value` words (the malloc settings), the
 * launcher it runs `deno` through (tools/start.sh, which grants the data dir and the keys file),
 * its `--v8-flags=…` and its permission flags.
 */

/** The repository's root, where the task runs. */
const ROOT = new URL("../../", import.meta.url).pathname;
/** The dashboard's files as the start task names them (relative to the repository root). */
const TASK_STATIC_DIR = "./static";
/** The same folder as an absolute path, so a child started from any directory may read it. */
const STATIC_DIR = new URL("../../static", import.meta.url).pathname;

/** The environment, launcher, V8 flags and permission flags of the `start` task. */
export function startTask(): {
  env: Record<string, string>;
  launcher: string[];
  v8Flags: string[];
  permissions: string[];
} {
  const url = new URL("../../deno.json", import.meta.url);
  const task = String(JSON.parse(Deno.readTextFileSync(url)).tasks?.start ?? "");
  // The command after the last `&&` runs the broker (before it: `deno install` of its packages).
  const words = task.split("&&").at(-1)!.split(" ").filter(Boolean);
  const env: Record<string, string> = {};
  let i = 0;
  for (; i < words.length; i++) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(words[i]!);
    if (!m) break;
    env[m[1]!] = m[2]!;
  }
  const launcher: string[] = [];
  for (; i < words.length && words[i] !== "deno"; i++) {
    launcher.push(words[i]!.includes("/") ? ROOT + words[i] : words[i]!);
  }
  return {
    env,
    launcher,
    v8Flags: words.filter((w) => w.startsWith("--v8-flags=")),
    permissions: words.filter((w) => /^--(allow|deny)-/.test(w)),
  };
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

/**
 * The start task's permission flags, its `./static` made the repository's `static/` so a child
 * may start from any directory. The launcher adds the data dir and the keys file.
 */
export function startTaskPermissions(): string[] {
  return startTask().permissions.map((flag) => {
    const eq = flag.indexOf("=");
    if (eq < 0) return flag;
    const list = flag.slice(eq + 1).split(",").map((v) => v === TASK_STATIC_DIR ? STATIC_DIR : v);
    return `${flag.slice(0, eq)}=${list.join(",")}`;
  });
}

/**
 * The command that runs `deno <denoArgs>` as the start task does: through its launcher, with
 * this Deno. The launcher `exec`s Deno, so the child's pid is the broker's.
 */
export function startTaskCommand(denoArgs: string[]): { cmd: string; args: string[] } {
  const [cmd, ...launcher] = startTask().launcher;
  if (!cmd) return { cmd: Deno.execPath(), args: denoArgs };
  return { cmd, args: [...launcher, Deno.execPath(), ...denoArgs] };
}
