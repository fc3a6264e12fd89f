/**
 * Ferry's entry point: loadConfig → Broker.open (replays the WALs) → Deno.serve(createHandler).
 * `deno task start` runs it; `deno serve main.ts` uses the default export instead.
 */

import { Broker } from "./lib/broker.ts";
import { type Config, ConfigError, helpText, loadConfig } from "./lib/config.ts";
import { Logger } from "./lib/log.ts";
import { type AppOptions, createHandler } from "./routes/app.ts";

/** How long SIGTERM waits for in-flight requests before closing anyway. */
const SHUTDOWN_GRACE_MS = 10_000;

/** Builds the request handler with the hooks this configuration asks for. */
export function appOptions(config: Config, log: Logger): AppOptions {
  const opts: AppOptions = { log, before: [], after: [] };
  if (config.accessLog) {
    opts.after!.push((req, route, res, seconds, requestId) => {
      log.info("request", {
        request_id: requestId,
        method: req.method,
        route: route?.pattern ?? "unmatched",
        status: res.status,
        duration_ms: Math.round(seconds * 100_000) / 100,
      });
    });
  }
  return opts;
}

async function openBroker(config: Config, log: Logger): Promise<Broker> {
  try {
    return await Broker.open(config, { log });
  } catch (e) {
    log.error("cannot start", { error: (e as Error).message });
    console.error(`ferry: cannot start: ${(e as Error).message}`);
    Deno.exit(1);
  }
}

/** Runs the broker until SIGTERM or SIGINT, then shuts down cleanly and exits 0. */
export async function run(config: Config): Promise<void> {
  const log = new Logger(config.logLevel);
  const broker = await openBroker(config, log);
  log.info("recovered", { data_dir: config.dataDir, ...broker.recovery });
  const server = Deno.serve({
    hostname: config.host,
    port: config.port,
    onListen: ({ hostname, port }) => {
      log.info("listening", {
        address: hostname,
        port,
        data_dir: config.dataDir,
        fsync: config.fsync,
        topics: broker.recovery.topics,
        messages: broker.recovery.messages,
        recovery_ms: broker.recovery.duration_ms,
      });
    },
  }, createHandler(broker, appOptions(config, log)));

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const t0 = performance.now();
    log.info("shutting down", { signal });
    const drained = broker.drain(); // answers parked consumers, refuses new work, flushes
    const grace = new Promise<string>((res) => setTimeout(() => res("timeout"), SHUTDOWN_GRACE_MS));
    const outcome = await Promise.race([server.shutdown().then(() => "ok"), grace]);
    await drained;
    await broker.close();
    log.info("stopped", {
      signal,
      in_flight_finished: outcome === "ok",
      duration_ms: Math.round(performance.now() - t0),
    });
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
  await server.finished;
}

function launchedByDenoServe(): boolean {
  try {
    return Deno.readTextFileSync("/proc/self/cmdline").split("\0")[1] === "serve";
  } catch {
    return false;
  }
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
    config = loadConfig(Deno.env.toObject(), launchedByDenoServe() ? [] : Deno.args);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    console.error(`ferry: ${e.message}`);
    Deno.exit(2);
  }
  if (launchedByDenoServe()) {
    const log = new Logger(config.logLevel);
    const broker = await openBroker(config, log);
    serveHandler = createHandler(broker, appOptions(config, log));
  } else {
    await run(config);
  }
}
