/**
 * Test support: `ferry` (cli/main.ts) as a real subprocess with the `ferry` task's permissions,
 * which are the documented install's, run to its exit or held open (tail, consume --follow) and
 * read line by line. The environment is cleared, so FERRY_* come only from the test.
 */

import { readLines } from "./child.ts";

/** The tool's entry point. */
export const CLI_MAIN = new URL("../../cli/main.ts", import.meta.url).pathname;

/** The permission flags of deno.json's `ferry` task. */
export function ferryPermissions(): string[] {
  const url = new URL("../../deno.json", import.meta.url);
  const task = String(JSON.parse(Deno.readTextFileSync(url)).tasks?.ferry ?? "");
  return task.split(" ").filter((w) => /^--(allow|deny)-/.test(w));
}

/** The `deno` arguments that run `ferry …args`. */
export function ferryArgs(args: string[]): string[] {
  return ["run", "--quiet", ...ferryPermissions(), CLI_MAIN, ...args];
}

/** How to run it: the broker's URL (as FERRY_URL), more environment, stdin, a directory. */
export interface FerryRunOptions {
  url?: string;
  env?: Record<string, string>;
  stdin?: string | Uint8Array;
  cwd?: string;
}

/** What a finished run printed and how it ended. */
export interface FerryRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment a run sees: enough for Deno to find its cache, plus the test's own. */
function environment(opts: FerryRunOptions): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["HOME", "PATH", "DENO_DIR", "XDG_CACHE_HOME"]) {
    const v = Deno.env.get(name);
    if (v !== undefined) env[name] = v;
  }
  if (opts.url) env.FERRY_URL = opts.url;
  return { ...env, ...opts.env };
}

/** Runs `ferry …args` to its exit; SIGKILLed after 30 s so a hang fails instead of stalling. */
export async function ferry(args: string[], opts: FerryRunOptions = {}): Promise<FerryRun> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ferryArgs(args),
    clearEnv: true,
    env: environment(opts),
    cwd: opts.cwd,
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone meanwhile */ }
  }, 30_000);
  try {
    if (opts.stdin !== undefined) {
      const w = proc.stdin.getWriter();
      await w.write(
        typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : opts.stdin,
      );
      await w.close();
    }
    const out = await proc.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

/** A `ferry` process left running (tail, consume --follow), read as it prints. */
export interface RunningFerry {
  /** Every stdout line so far. */
  out: string[];
  /** Every stderr line so far. */
  err: string[];
  /** Resolves once `pred` holds for the lines so far; rejects when the process ends first. */
  until(pred: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  /** Sends `signal` (default SIGINT, as Ctrl-C) and resolves with the exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
  status: Promise<Deno.CommandStatus>;
}

/** Starts `ferry …args` and reads its stdout and stderr line by line; the caller stops it. */
export function spawnFerry(args: string[], opts: FerryRunOptions = {}): RunningFerry {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ferryArgs(args),
    clearEnv: true,
    env: environment(opts),
    cwd: opts.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  const err: string[] = [];
  const waiters = new Set<() => void>();
  const heard = () => {
    for (const w of waiters) w();
  };
  let ended = false;
  const reading = Promise.all([
    readLines(proc.stdout, (l) => {
      out.push(l);
      heard();
    }),
    readLines(proc.stderr, (l) => {
      err.push(l);
      heard();
    }),
  ]).catch(() => {}).finally(() => {
    ended = true;
    heard();
  });
  return {
    out,
    err,
    status: proc.status,
    until(pred, what, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const show = () => `\nstdout:\n${out.join("\n")}\nstderr:\n${err.join("\n")}`;
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${what} within ${timeoutMs} ms${show()}`));
        }, timeoutMs);
        const check = () => {
          if (pred()) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve();
          } else if (ended) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`ferry ended before ${what}${show()}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
    async stop(signal: Deno.Signal = "SIGINT") {
      try {
        proc.kill(signal);
      } catch { /* gone already */ }
      const timer = setTimeout(() => {
        try {
          proc.kill("SIGKILL");
        } catch { /* gone */ }
      }, 10_000);
      const { code } = await proc.status;
      clearTimeout(timer);
      await reading;
      return code;
    },
  };
}

/** True when `text` holds an ANSI escape sequence. */
export function hasAnsi(text: string): boolean {
  return text.includes("\x1b[");
}

/**
 * Runs `ferry …args` with stdout on a pseudo-terminal (util-linux `script`), to see what a
 * person at a terminal sees; the output comes back with the terminal's `\r\n` line ends.
 */
export async function ferryOnTerminal(
  args: string[],
  opts: FerryRunOptions = {},
): Promise<FerryRun> {
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const line = [Deno.execPath(), ...ferryArgs(args)].map(quote).join(" ");
  const out = await new Deno.Command("script", {
    args: ["-qefc", line, "/dev/null"],
    clearEnv: true,
    env: { TERM: "xterm", ...environment(opts) },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}
