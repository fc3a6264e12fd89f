/**
 * @module Child servers: a broker started as `deno task start` starts it (the start task's
 * permissions, V8 flags, environment and launcher, or FERRY_BENCH_FLAGS / FERRY_BENCH_ENV),
 * on port 0 and a fresh data dir; the helper servers of tests/bench/ (ceilings) the same way;
 * and the client scripts the e2e, fan-out and drain rows run as their own processes.
 */

import { parseLogLine, readLines } from "../../_support/child.ts";
import { startTask, startTaskCommand, startTaskPermissions } from "../../_support/start_task.ts";
import { removeDir, tempDir, track } from "./cleanup.ts";
import { HERE, join, type Options } from "./plan.ts";

/** A child server that printed its "listening" line. */

export interface Server {
  url: string;
  pid: number;
  /** The V8 inspector's WebSocket address, when started with `--inspect`. */
  inspector?: string;
  /** Wall time from spawn to the "listening" line. */
  listenMs: number;
  /** Every JSON log line seen so far. */
  records: Record<string, unknown>[];
  stop(signal?: Deno.Signal): Promise<void>;
}

/**
 * Runtime flags and environment the broker is started with: those of the `start` task in
 * deno.json (so the bench measures what `deno task start` runs), or FERRY_BENCH_FLAGS and
 * FERRY_BENCH_ENV (`NAME=value …`; "" for none).
 */
export const BROKER_RUNTIME_FLAGS: string[] = Deno.env.get("FERRY_BENCH_FLAGS")?.split(" ")
  .filter(Boolean) ?? startTask().v8Flags;
export const BROKER_RUNTIME_ENV: Record<string, string> = (() => {
  const override = Deno.env.get("FERRY_BENCH_ENV");
  if (override === undefined) return startTask().env;
  return Object.fromEntries(override.split(" ").filter(Boolean).map((w) => w.split("=", 2)));
})();

/**
 * Spawns a Deno script that logs JSON lines on stderr; resolves at its "listening" line.
 * `permissions` are its permission flags (a broker gets the start task's, and its launcher).
 */
export async function spawnServer(
  script: string,
  args: string[],
  permissions: string[],
  denoFlags: string[] = [],
  launch = (denoArgs: string[]) => ({ cmd: Deno.execPath(), args: denoArgs }),
): Promise<Server> {
  const timeoutMs = 120_000;
  const t0 = performance.now();
  let inspector: string | undefined;
  const command = launch([
    "run",
    ...permissions,
    ...BROKER_RUNTIME_FLAGS,
    ...denoFlags,
    script,
    ...args,
  ]);
  const proc = track(
    new Deno.Command(command.cmd, {
      args: command.args,
      env: {
        ...BROKER_RUNTIME_ENV,
        NO_COLOR: "1",
        BROKER_LOG_LEVEL: "info",
        BROKER_ACCESS_LOG: "false",
      },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn(),
  );
  const records: Record<string, unknown>[] = [];
  const tail: string[] = [];
  let onListen!: (port: number) => void;
  let onFail!: (e: Error) => void;
  const listening = new Promise<number>((res, rej) => {
    onListen = res;
    onFail = rej;
  });
  readLines(proc.stderr, (line) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
    const rec = parseLogLine(line);
    if (rec) records.push(rec);
    else inspector ??= /Debugger listening on (ws:\/\/\S+)/.exec(line)?.[1];
    if (rec?.msg === "listening") onListen(Number(rec.port));
  }).catch(() => {}).finally(() => {
    onFail(new Error(`${script} exited before listening:\n${tail.join("\n")}`));
  });
  const timer = setTimeout(
    () => onFail(new Error(`${script} not listening after ${timeoutMs} ms`)),
    timeoutMs,
  );
  let port: number;
  try {
    port = await listening;
  } catch (e) {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone */ }
    throw e;
  } finally {
    clearTimeout(timer);
  }
  const listenMs = performance.now() - t0;
  return {
    url: `http://127.0.0.1:${port}`,
    pid: proc.pid,
    inspector,
    listenMs,
    records,
    async stop(signal: Deno.Signal = "SIGTERM") {
      try {
        proc.kill(signal);
      } catch { /* gone */ }
      const killer = setTimeout(() => {
        try {
          proc.kill("SIGKILL");
        } catch { /* gone */ }
      }, 30_000);
      await proc.status;
      clearTimeout(killer);
    },
  };
}

export function startBroker(
  o: Options,
  dataDir: string,
  maxQueue: number,
  fsync = "always",
  denoFlags: string[] = [],
  args: string[] = [],
): Promise<Server> {
  return spawnServer(
    o.broker,
    [
      "--port",
      "0",
      "--data-dir",
      dataDir,
      "--fsync",
      fsync,
      "--max-queue",
      String(maxQueue),
      ...args,
    ],
    startTaskPermissions(),
    denoFlags,
    startTaskCommand,
  );
}

/** A fresh broker on a fresh temp dir; both go away after `fn`. */
export async function withBroker<T>(
  o: Options,
  maxQueue: number,
  fn: (b: Server) => Promise<T>,
  denoFlags: string[] = [],
  args: string[] = [],
): Promise<T> {
  const dir = await tempDir("ferry-bench-");
  const b = await startBroker(o, dir, maxQueue, "always", denoFlags, args);
  try {
    return await fn(b);
  } finally {
    await b.stop("SIGKILL");
    await removeDir(dir);
  }
}

/**
 * Runs a client script of tests/bench/ with `args` as its own process; resolves with its output.
 */
export function runClient(args: string[], script = "e2e_client.ts"): Promise<Deno.CommandOutput> {
  const client = join(HERE, script);
  return track(
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", client, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }).spawn(),
  ).output();
}

/** The last JSON line a client printed. */
export async function clientResult(out: Promise<Deno.CommandOutput>) {
  return JSON.parse(new TextDecoder().decode((await out).stdout).trim().split("\n").at(-1) ?? "{}");
}
