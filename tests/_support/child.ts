/**
 * Test support: `main.ts` as a child process, for what only a real process shows (SIGKILL,
 * SIGTERM, start-up failures, descriptor limits): spawned and always stopped, run to its exit,
 * and its stderr log read as JSON lines. It runs through the `start` task's launcher with its
 * permissions, so the tests exercise production's permission set.
 */

import { startTaskCommand, startTaskPermissions } from "./start_task.ts";

/** The broker's entry point. */
export const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** A parsed stderr line of the broker. */
export type LogLine = Record<string, unknown> & { msg?: string; level?: string };

/** A log line as JSON, or undefined for what is not one (a runtime warning, a panic). */
export function parseLogLine(line: string): LogLine | undefined {
  try {
    const rec = JSON.parse(line);
    return rec && typeof rec === "object" ? rec : undefined;
  } catch {
    return undefined;
  }
}

/** Calls `onLine` with each line of `stream` as it arrives; resolves once the stream ends. */
export async function readLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  let buf = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  }
  if (buf) onLine(buf);
}

/**
 * The command that runs main.ts with `args` as the start task does: through its launcher, which
 * grants the data dir and keys file that `args` and the environment name, with its permissions.
 */
function runCommand(args: string[]): { cmd: string; args: string[] } {
  return startTaskCommand(["run", ...startTaskPermissions(), MAIN, ...args]);
}

export interface ChildBroker {
  url: string;
  port: number;
  dataDir: string;
  process: Deno.ChildProcess;
  /** Every stderr line the child has printed so far. */
  logs: string[];
  /**
   * Resolves with the first log line from line `from` on whose `msg` is `msg`; rejects when the
   * child exits first or after `timeoutMs`, with the log so far.
   */
  logged(msg: string, from?: number, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit status. */
  exited: Promise<Deno.CommandStatus>;
  /** Resolves once the child's stderr has ended and every line of it is in `logs`. */
  ended: Promise<void>;
  kill(signal?: Deno.Signal): void;
}

/**
 * Spawns `main.ts` as its own process on a free port and resolves once it logs "listening".
 * The caller kills it; the data dir is the caller's too.
 */
export async function spawnBroker(
  opts: {
    dataDir: string;
    env?: Record<string, string>;
    args?: string[];
    /** Open files the process may hold (through util-linux `prlimit`). */
    fdLimit?: number;
    /** The process's umask, in octal (`"022"`; through `sh -c umask`). */
    umask?: string;
  },
): Promise<ChildBroker> {
  const run = runCommand(["--port", "0", "--data-dir", opts.dataDir, ...(opts.args ?? [])]);
  let [cmd, args] = opts.fdLimit === undefined
    ? [run.cmd, run.args]
    : ["prlimit", [`--nofile=${opts.fdLimit}`, run.cmd, ...run.args]];
  if (opts.umask !== undefined) {
    [cmd, args] = ["sh", ["-c", `umask ${opts.umask} && exec "$@"`, "sh", cmd, ...args]];
  }
  const process = new Deno.Command(cmd, {
    args,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const logs: string[] = [];
  /** Waiters of logged(): each sees every new line; true once it is settled. */
  const waiters = new Set<(line: string | undefined) => boolean>();
  let resolveListen!: (port: number) => void;
  let rejectListen!: (e: Error) => void;
  const listening = new Promise<number>((res, rej) => {
    resolveListen = res;
    rejectListen = rej;
  });
  let done = false;
  const ended = readLines(process.stderr, (line) => {
    logs.push(line);
    const rec = parseLogLine(line);
    if (rec?.msg === "listening") resolveListen(Number(rec.port));
    for (const w of waiters) if (w(line)) waiters.delete(w);
  }).catch(() => {/* the pipe broke: the lines so far are all there is */}).finally(() => {
    done = true;
    rejectListen(new Error(`broker exited before listening:\n${logs.join("\n")}`));
    for (const w of waiters) w(undefined);
    waiters.clear();
  });
  const port = await listening;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir: opts.dataDir,
    process,
    logs,
    exited: process.status,
    ended,
    logged(msg: string, from = 0, timeoutMs = 30_000) {
      const isIt = (line: string) => parseLogLine(line)?.msg === msg;
      const seen = logs.slice(from).find(isIt);
      if (seen) return Promise.resolve(seen);
      return new Promise((res, rej) => {
        const give = (why: string) =>
          rej(new Error(`no log line "${msg}" ${why}:\n${logs.join("\n")}`));
        if (done) return give("before the broker's stderr closed");
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          give(`within ${timeoutMs} ms`);
        }, timeoutMs);
        const waiter = (line: string | undefined) => {
          if (line !== undefined && !isIt(line)) return false;
          clearTimeout(timer);
          if (line === undefined) give("before the broker's stderr closed");
          else res(line);
          return true;
        };
        waiters.add(waiter);
      });
    },
    kill(signal: Deno.Signal = "SIGKILL") {
      try {
        process.kill(signal);
      } catch { /* already gone */ }
    },
  };
}

/** The child's stderr lines that parse as JSON. */
export function logLines(child: ChildBroker): LogLine[] {
  return child.logs.map(parseLogLine).filter((l) => l !== undefined);
}

/** Every child started through `start()`, so `withDataDir` can kill what a failed test left. */
const running = new Set<ChildBroker>();

/** Spawns the broker on `dataDir` and remembers it for `withDataDir`'s clean-up. */
export async function start(
  dataDir: string,
  env: Record<string, string> = {},
  args: string[] = [],
  fdLimit?: number,
): Promise<ChildBroker> {
  const child = await spawnBroker({ dataDir, env, args, fdLimit });
  running.add(child);
  return child;
}

/** Sends `signal` and waits for the exit status (bounded: SIGKILL after `graceMs`). */
export async function stop(
  child: ChildBroker,
  signal: Deno.Signal = "SIGKILL",
  graceMs = 10_000,
): Promise<Deno.CommandStatus> {
  child.kill(signal);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((res) => timer = setTimeout(() => res("late"), graceMs));
  const first = await Promise.race([child.exited, late]);
  clearTimeout(timer);
  if (first === "late") child.kill("SIGKILL");
  const status = await child.exited;
  running.delete(child);
  await child.ended;
  return status;
}

/** Runs `fn` with a fresh temp dir; kills every child left running and removes the dir. */
export async function withDataDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-durability-" });
  try {
    await fn(dir);
  } finally {
    for (const child of [...running]) await stop(child, "SIGKILL");
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * Runs `main.ts --data-dir <dataDir> …args` to its exit, for runs that must end by themselves
 * (`--help`, a bad setting, a damaged WAL); SIGKILLed after 15 s so a run that starts anyway
 * fails the test instead of hanging it.
 */
export async function runMain(
  opts: { dataDir: string; args?: string[]; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const run = runCommand(["--data-dir", opts.dataDir, ...(opts.args ?? [])]);
  const proc = new Deno.Command(run.cmd, {
    args: run.args,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone meanwhile */ }
  }, 15_000);
  try {
    const out = await proc.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}
