/**
 * Ferry's entry point: loadConfig → openRuntime (runtime.ts; replays the WALs) → Deno.serve.
 * `deno task start` runs it; `deno serve main.ts` uses the default export instead.
 */

import { type Config, ConfigError, helpText, loadConfig, SETTINGS } from "./lib/config.ts";
import { DataDirInUseError } from "./lib/storage/data_dir_lock.ts";
import { Logger } from "./lib/log.ts";
import { createHandler } from "./routes/app.ts";
import {
  appOptions,
  authEnabled,
  joinCluster,
  openRuntime,
  permissionProblem,
  readKeys,
  type Runtime,
} from "./runtime.ts";

/** How long SIGTERM waits for in-flight requests before closing anyway. */
const SHUTDOWN_GRACE_MS = 10_000;

async function start(config: Config, log: Logger): Promise<Runtime> {
  const denied = permissionProblem(config);
  if (denied) {
    console.error(`ferry: ${denied}`);
    Deno.exit(1);
  }
  try {
    const rt = await openRuntime(config, log);
    if (authEnabled(config) && rt.keys.size === 0) {
      log.warn("auth is on but no API key is configured; every request needing one gets 401");
    }
    return rt;
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`ferry: ${e.message}`);
      Deno.exit(2);
    }
    if (e instanceof DataDirInUseError) {
      console.error(`ferry: ${e.message}`);
      Deno.exit(1);
    }
    log.error("cannot start", { error: (e as Error).message });
    console.error(`ferry: cannot start: ${(e as Error).message}`);
    Deno.exit(1);
  }
}

/** SIGHUP re-reads the keys file; a bad file keeps the keys in use. Keys are never logged. */
function reloadKeysOnHangup(config: Config, rt: Runtime, log: Logger): void {
  Deno.addSignalListener("SIGHUP", async () => {
    try {
      rt.keys.replace(await readKeys(config));
      log.info("api keys reloaded", { keys: rt.keys.size, file: config.apiKeysFile });
    } catch (e) {
      log.error("api keys not reloaded; the previous keys stay in use", {
        error: (e as Error).message,
      });
    }
  });
}

/** Deno.serve, or one clear line and exit 1 when the address cannot be had (in use, denied). */
function listen(
  config: Config,
  log: Logger,
  handler: Deno.ServeHandler,
  onListen: (addr: Deno.NetAddr) => void,
): Listener {
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ hostname: config.host, port: config.port, onListen }, handler);
  } catch (e) {
    const error = (e as Error).message;
    log.error("cannot listen", { address: config.host, port: config.port, error });
    console.error(`ferry: cannot listen on ${config.host}:${config.port}: ${error}`);
    Deno.exit(1);
  }
  return new Listener(
    server,
    { hostname: config.host, port: (server.addr as Deno.NetAddr).port },
    handler,
    log,
  );
}

/** Longest wait between attempts to listen again after the accept loop failed. */
const RELISTEN_MAX_MS = 5_000;

/**
 * Keeps the broker listening. Deno.serve's accept loop ends for good when accept() fails (no
 * file descriptor left: too many clients holding connections), and the process would then serve
 * nobody; this listens again on the same address, backing off, until it succeeds.
 */
class Listener {
  #stopping = false;
  readonly finished: Promise<void>;

  constructor(
    public server: Deno.HttpServer,
    readonly addr: { hostname: string; port: number },
    readonly handler: Deno.ServeHandler,
    readonly log: Logger,
  ) {
    this.finished = this.#watch();
  }

  async #watch(): Promise<void> {
    let waitMs = 100;
    while (true) {
      try {
        await this.server.finished;
        return;
      } catch (e) {
        if (this.#stopping) return;
        this.log.error("stopped accepting connections; listening again", {
          error: (e as Error).message,
          retry_ms: waitMs,
        });
      }
      while (!this.#stopping) {
        await new Promise((res) => setTimeout(res, waitMs));
        waitMs = Math.min(waitMs * 2, RELISTEN_MAX_MS);
        try {
          this.server = Deno.serve({ ...this.addr, onListen: () => {} }, this.handler);
          this.log.info("listening again", this.addr);
          waitMs = 100;
          break;
        } catch (e) {
          this.log.error("cannot listen yet", { error: (e as Error).message, retry_ms: waitMs });
        }
      }
      if (this.#stopping) return;
    }
  }

  /** Stops accepting and waits for the requests under way. */
  shutdown(): Promise<void> {
    this.#stopping = true;
    return this.server.shutdown();
  }
}

/**
 * Runs the broker until SIGTERM or SIGINT, then shuts down cleanly and exits 0. Never returns:
 * `deno run` warns "did you mean to run deno serve?" once a module that exports a default
 * `{ fetch }` (for `deno serve main.ts`) has been evaluated, and this keeps main.ts's evaluation
 * going until the exit.
 */
export async function run(config: Config): Promise<never> {
  const log = new Logger(config.logLevel);
  const rt = await start(config, log);
  const { broker } = rt;
  log.info("recovered", { data_dir: config.dataDir, ...broker.recovery });

  let stopping: Promise<never> | undefined;
  const shutDown = async (signal: string): Promise<never> => {
    const t0 = performance.now();
    log.info("shutting down", { signal });
    const resigned = member?.close(); // the others elect a new leader at once
    const drained = broker.drain(); // answers parked consumers, refuses new work, flushes
    const grace = new Promise<string>((res) => setTimeout(() => res("timeout"), SHUTDOWN_GRACE_MS));
    const outcome = await Promise.race([server.shutdown().then(() => "ok"), grace]);
    await drained;
    await resigned;
    await broker.close();
    log.info("stopped", {
      signal,
      in_flight_finished: outcome === "ok",
      duration_ms: Math.round(performance.now() - t0),
    });
    Deno.exit(0);
  };
  // Bound before "listening" is logged: a signal sent as soon as it is seen must not find the
  // default action (ending the process at once) still in place.
  Deno.addSignalListener("SIGTERM", () => stopping ??= shutDown("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stopping ??= shutDown("SIGINT"));
  reloadKeysOnHangup(config, rt, log);

  const server = listen(
    config,
    log,
    createHandler(broker, appOptions(config, log, rt)),
    ({ hostname, port }) => {
      if (broker.cluster && !config.advertiseUrl) broker.cluster.url = `http://${hostname}:${port}`;
      log.info("listening", {
        address: hostname,
        port,
        data_dir: config.dataDir,
        fsync: config.fsync,
        topics: broker.recovery.topics,
        messages: broker.recovery.messages,
        recovery_ms: broker.recovery.duration_ms,
        auth: authEnabled(config),
      });
    },
  );
  const member = joinCluster(config, rt, log);
  await server.finished; // only shutDown() shuts the server down
  return await stopping!;
}

function launchedByDenoServe(): boolean {
  try {
    return Deno.readTextFileSync("/proc/self/cmdline").split("\0")[1] === "serve";
  } catch {
    return false;
  }
}

/** The settings' variables, and no others: the start task grants `--allow-env=PORT,BROKER_*`. */
function settingsEnv(): Record<string, string | undefined> {
  return Object.fromEntries(SETTINGS.map((s) => [s.env, Deno.env.get(s.env)]));
}

let serveHandler: ((req: Request) => Promise<Response>) | undefined;

/** For `deno serve main.ts`: the broker opens with settings from the environment. */
export default {
  fetch(req: Request): Promise<Response> {
    if (!serveHandler) return Promise.resolve(new Response("starting", { status: 503 }));
    return serveHandler(req);
  },
};

if (import.meta.main) {
  if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
    console.log(helpText());
    Deno.exit(0);
  }
  let config: Config;
  try {
    config = loadConfig(settingsEnv(), launchedByDenoServe() ? [] : Deno.args);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    console.error(`ferry: ${e.message}`);
    Deno.exit(2);
  }
  if (launchedByDenoServe()) {
    const log = new Logger(config.logLevel);
    const rt = await start(config, log);
    reloadKeysOnHangup(config, rt, log);
    serveHandler = createHandler(rt.broker, appOptions(config, log, rt));
  } else {
    await run(config);
  }
}
