/**
 * Ferry's entry point: loadConfig → openRuntime (runtime.ts; replays the WALs) → serve (serve.ts)
 * → signals, and the exit codes. `deno task start` runs it; `deno serve main.ts` uses the default
 * export instead.
 */

import {
  type Config,
  ConfigError,
  ENV_NAMES_VARIABLE,
  helpText,
  loadConfig,
  SETTINGS,
} from "./lib/config.ts";
import { DataDirInUseError } from "./lib/storage/data_dir_lock.ts";
import { loadSecretBox } from "./lib/push/secret_box.ts";
import { Logger } from "./lib/log.ts";
import * as runtime from "./runtime.ts";
import { supervise } from "./supervisor.ts";
import {
  brokerHandler,
  DeferredFetch,
  launchedByDenoServe,
  type Listener,
  ListenError,
  serve,
  SHUTDOWN_GRACE_MS,
  stopServing,
} from "./serve.ts";

/** One line on stderr, then the exit code: 1 when the process cannot run, 2 for a bad setting. */
function fail(code: 1 | 2, line: string): never {
  console.error(`ferry: ${line}`);
  Deno.exit(code);
}

/** openRuntime, or one stderr line and the exit code of what stops it. */
async function start(config: Config, log: Logger): Promise<runtime.Runtime> {
  const denied = runtime.permissionProblem(config);
  if (denied) fail(1, denied);
  const rt = await runtime.openRuntime(config, log).catch((e: Error): never => {
    if (e instanceof ConfigError) fail(2, e.message);
    if (e instanceof DataDirInUseError) fail(1, e.message);
    log.error("cannot start", { error: e.message });
    fail(1, `cannot start: ${e.message}`);
  });
  if (runtime.authEnabled(config) && rt.keys.size === 0) {
    log.warn("auth is on but no API key is configured; every request needing one gets 401");
  }
  return rt;
}

/**
 * BROKER_WORKERS > 1: the supervisor runs the workers (supervisor.ts), once the settings the
 * workers would refuse are checked here, with the exit codes of one broker.
 */
async function startWorkers(config: Config, log: Logger, underDenoServe: boolean): Promise<never> {
  if (underDenoServe) {
    fail(2, "BROKER_WORKERS: deno serve runs one isolate per --parallel; use deno task start");
  }
  const denied = runtime.permissionProblem(config);
  if (denied) fail(1, denied);
  const webhookKey = (c: Config) => c.webhookKeyFile ? loadSecretBox(c) : Promise.resolve();
  for (const read of [runtime.readKeys, runtime.readTls, runtime.clusterClients, webhookKey]) {
    await read(config).catch((e: Error): never => {
      if (e instanceof ConfigError) fail(2, e.message);
      throw e;
    });
  }
  return await supervise(config, log).catch((e: Error): never => {
    if (e instanceof DataDirInUseError) fail(1, e.message);
    log.error("cannot start", { error: e.message });
    fail(1, `cannot start: ${e.message}`);
  });
}

/** SIGHUP re-reads the keys file; a bad file keeps the keys in use. Keys are never logged. */
function reloadKeysOnHangup(config: Config, rt: runtime.Runtime, log: Logger): void {
  Deno.addSignalListener("SIGHUP", () => {
    runtime.reloadKeys(config, log, (keys) => runtime.replaceKeys(rt, keys));
  });
}

/**
 * Runs the broker until SIGTERM or SIGINT, then shuts down cleanly and exits 0. Never returns:
 * `deno run` warns "did you mean to run deno serve?" once a module that exports a default
 * `{ fetch }` (for `deno serve main.ts`) has been evaluated, and this keeps main.ts's evaluation
 * going until the exit.
 */
export async function run(config: Config, rt: runtime.Runtime, log: Logger): Promise<never> {
  const { broker } = rt;
  log.info("recovered", { data_dir: config.dataDir, ...broker.recovery });

  let stopping: Promise<never> | undefined;
  const shutDown = async (signal: string): Promise<never> => {
    const t0 = performance.now();
    log.info("shutting down", { signal });
    const resigned = member?.close(); // the others elect a new leader at once
    const finished = await stopServing(broker, server, SHUTDOWN_GRACE_MS, resigned);
    const duration_ms = Math.round(performance.now() - t0);
    log.info("stopped", { signal, in_flight_finished: finished, duration_ms });
    Deno.exit(0);
  };
  // Bound before "listening" is logged: a signal sent as soon as it is seen must not find the
  // default action (ending the process at once) still in place.
  Deno.addSignalListener("SIGTERM", () => stopping ??= shutDown("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stopping ??= shutDown("SIGINT"));

  let server: Listener;
  try {
    server = serve(config, rt, log);
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    fail(1, e.message);
  }
  Deno.addSignalListener("SIGHUP", () => {
    runtime.reloadTls(config, log, (tls) => server.replaceTls(tls));
  });
  const member = rt.broker.member;
  member?.start(); // now that the node's URL is known
  await server.finished; // only shutDown() shuts the server down
  return await stopping!;
}

/**
 * The settings' variables and every other `BROKER_*` variable set (loadConfig refuses those),
 * and no others: the start task grants `--allow-env=PORT,BROKER_*`, so the names of the
 * variables set come from its launcher (tools/start.sh), or from the environment itself when
 * all of it may be read (`deno serve --allow-all`).
 */
function settingsEnvironment(): Record<string, string | undefined> {
  const names = new Set(SETTINGS.map((s) => s.env));
  const all = Deno.permissions.querySync({ name: "env" }).state === "granted";
  const set = all ? Object.keys(Deno.env.toObject()) : Deno.env.get(ENV_NAMES_VARIABLE)?.split(" ");
  for (const name of set ?? []) if (name.startsWith("BROKER_")) names.add(name);
  return Object.fromEntries([...names].map((name) => [name, Deno.env.get(name)]));
}

/** For `deno serve main.ts`: the broker opens with settings from the environment. */
const served = new DeferredFetch();
export default served;

if (import.meta.main) {
  if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
    console.log(helpText());
    Deno.exit(0);
  }
  const env = settingsEnvironment();
  const underDenoServe = launchedByDenoServe(); // then Deno.args are deno serve's flags
  let config: Config;
  try {
    config = loadConfig(env, underDenoServe ? [] : Deno.args);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    fail(2, e.message);
  }
  const log = new Logger(config.logLevel);
  if (underDenoServe && (config.tlsCert || config.tlsKey)) {
    fail(2, "BROKER_TLS_CERT: deno serve listens itself, without them; use deno task start");
  }
  if (config.workers > 1) await startWorkers(config, log, underDenoServe);
  const rt = await start(config, log);
  reloadKeysOnHangup(config, rt, log);
  if (underDenoServe) served.ready(brokerHandler(config, rt, log));
  else await run(config, rt, log);
}
