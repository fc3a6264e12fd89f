/**
 * The `start` task of deno.json read apart, so tests, benchmarks and soak runs start the broker
 * the way `deno task start` does: its leading `NAME=value` words (the malloc settings), its
 * `--v8-flags=…` and its permission flags.
 */

/** The data dir the start task's permissions name. */
const TASK_DATA_DIR = "./data";
/** The dashboard's files as the start task names them (relative to the repository root). */
const TASK_STATIC_DIR = "./static";
/** The same folder as an absolute path, so a child started from any directory may read it. */
const STATIC_DIR = new URL("../../static", import.meta.url).pathname;

/** The environment, V8 flags and permission flags of the `start` task. */
export function startTask(): {
  env: Record<string, string>;
  v8Flags: string[];
  permissions: string[];
} {
  const url = new URL("../../deno.json", import.meta.url);
  const task = String(JSON.parse(Deno.readTextFileSync(url)).tasks?.start ?? "");
  const words = task.split(" ").filter(Boolean);
  const env: Record<string, string> = {};
  for (const w of words) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(w);
    if (!m) break;
    env[m[1]!] = m[2]!;
  }
  return {
    env,
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
 * The start task's permission flags for a broker on `dataDir`: its `./data` becomes `dataDir`
 * (a `:memory:` broker gets no data files at all), `./static` the repository's `static/`, and
 * `read` (a keys file) joins what it may read. So a spawned broker runs with production's
 * permissions, not `-A`.
 */
export function startTaskPermissions(dataDir: string, read: string[] = []): string[] {
  if ([dataDir, ...read].some((p) => p.includes(","))) {
    throw new Error(`a path in a permission list cannot hold a comma: ${[dataDir, ...read]}`);
  }
  const flags: string[] = [];
  let readAdded = read.length === 0;
  for (const flag of startTask().permissions) {
    const eq = flag.indexOf("=");
    if (eq < 0) {
      flags.push(flag);
      if (flag === "--allow-read") readAdded = true; // reads everything already
      continue;
    }
    const name = flag.slice(0, eq);
    const list = flag.slice(eq + 1).split(",").flatMap((v) =>
      v === TASK_STATIC_DIR
        ? [STATIC_DIR]
        : v !== TASK_DATA_DIR
        ? [v]
        : dataDir === ":memory:"
        ? []
        : [dataDir]
    );
    if (name === "--allow-read" && !readAdded) {
      list.push(...read);
      readAdded = true;
    }
    // An empty list would read as the bare flag, which allows everything: leave it out.
    if (list.length) flags.push(`${name}=${list.join(",")}`);
  }
  if (!readAdded) flags.push(`--allow-read=${read.join(",")}`);
  return flags;
}
