/**
 * Test support: a real broker on a loopback port, either in this process (fast, with a
 * hand-driven clock if wanted) or as a child process (for SIGKILL and SIGTERM tests).
 */

import type { Broker } from "../../lib/broker.ts";
import { type Config, defaultConfig } from "../../lib/config.ts";
import { Logger } from "../../lib/log.ts";
import { createHandler } from "../../routes/app.ts";
import { appOptions, openRuntime, type Runtime } from "../../runtime.ts";

export interface InProcessBroker {
  url: string;
  broker: Broker;
  /** The metrics and API keys wired around the broker, as in production. */
  runtime: Runtime;
  dataDir: string;
  /** Stops the server, closes the broker, removes the data dir unless keepData. */
  close(opts?: { keepData?: boolean }): Promise<void>;
}

/**
 * Starts a broker and Deno.serve on 127.0.0.1:0 in this process, with a temp data dir, built by
 * runtime.ts's openRuntime() and appOptions(): the same hooks (API keys, metrics, access log) as
 * production. `log` receives the broker's log lines (default: none).
 */
export async function startBroker(
  overrides: Partial<Config> = {},
  opts: { clock?: () => number; log?: Logger } = {},
): Promise<InProcessBroker> {
  const dataDir = overrides.dataDir ?? await Deno.makeTempDir({ prefix: "ferry-test-" });
  const config = defaultConfig({ port: 0, logLevel: "error", ...overrides, dataDir });
  const log = opts.log ?? new Logger(config.logLevel, () => {});
  const runtime = await openRuntime(config, log, { clock: opts.clock });
  const { broker } = runtime;
  const handler = createHandler(broker, appOptions(config, log, runtime));
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handler);
  const url = `http://127.0.0.1:${server.addr.port}`;
  return {
    url,
    broker,
    runtime,
    dataDir,
    async close(o = {}) {
      await server.shutdown();
      await broker.close();
      if (!o.keepData && dataDir !== ":memory:") await Deno.remove(dataDir, { recursive: true });
    },
  };
}

export interface ChildBroker {
  url: string;
  port: number;
  dataDir: string;
  process: Deno.ChildProcess;
  /** Every stderr line the child has printed so far. */
  logs: string[];
  /** Resolves with the first log line from line `from` on whose `msg` is `msg`. */
  logged(msg: string, from?: number): Promise<string>;
  /** Resolves with the exit status. */
  exited: Promise<Deno.CommandStatus>;
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
  },
): Promise<ChildBroker> {
  const mainTs = new URL("../../main.ts", import.meta.url).pathname;
  const run = [
    "run",
    "-A",
    mainTs,
    "--port",
    "0",
    "--data-dir",
    opts.dataDir,
    ...(opts.args ?? []),
  ];
  const [cmd, args] = opts.fdLimit === undefined
    ? [Deno.execPath(), run]
    : ["prlimit", [`--nofile=${opts.fdLimit}`, Deno.execPath(), ...run]];
  const process = new Deno.Command(cmd, {
    args,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const logs: string[] = [];
  const waiting = new Map<string, ((line: string) => void)[]>();
  let resolveListen!: (port: number) => void;
  let rejectListen!: (e: Error) => void;
  const listening = new Promise<number>((res, rej) => {
    resolveListen = res;
    rejectListen = rej;
  });
  const exited = process.status;
  (async () => {
    const lines = process.stderr.pipeThrough(new TextDecoderStream());
    let buf = "";
    for await (const chunk of lines) {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        logs.push(line);
        try {
          const rec = JSON.parse(line);
          if (rec.msg === "listening") resolveListen(rec.port);
          for (const fn of waiting.get(rec.msg) ?? []) fn(line);
          waiting.delete(rec.msg);
        } catch { /* not JSON */ }
      }
    }
    rejectListen(new Error(`broker exited before listening:\n${logs.join("\n")}`));
  })();
  const port = await listening;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir: opts.dataDir,
    process,
    logs,
    exited,
    logged(msg: string, from = 0) {
      const seen = logs.slice(from).find((l) => l.includes(`"msg":${JSON.stringify(msg)}`));
      if (seen) return Promise.resolve(seen);
      return new Promise((res) => waiting.set(msg, [...(waiting.get(msg) ?? []), res]));
    },
    kill(signal: Deno.Signal = "SIGKILL") {
      try {
        process.kill(signal);
      } catch { /* already gone */ }
    },
  };
}
