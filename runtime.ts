/**
 * The broker and what production wires around it: API keys, metrics, and the handler's hooks.
 * main.ts runs it; tests build their brokers with it too, so they get production's wiring.
 */

import { type ApiKey, KeyRing, parseKeyFile, parseKeyList } from "./lib/auth.ts";
import { Broker, type OpenOptions } from "./lib/broker.ts";
import { type Config, ConfigError } from "./lib/config.ts";
import type { Logger } from "./lib/log.ts";
import { Metrics } from "./routes/metrics.ts";
import type { AppOptions } from "./routes/app.ts";
import { authHook } from "./routes/auth.ts";
import { metricsHook } from "./routes/ops.ts";

/** The broker and what production wires around it; tests get the same from startBroker(). */
export interface Runtime {
  broker: Broker;
  metrics: Metrics;
  /** The API keys; SIGHUP replaces them. */
  keys: KeyRing;
}

/** Auth is on when either key setting is set; a keys file with no keys then refuses everyone. */
export function authEnabled(config: Config): boolean {
  return config.apiKeys !== "" || config.apiKeysFile !== "";
}

/** The keys of BROKER_API_KEYS and the keys file; a ConfigError names the setting, never a key. */
export async function readKeys(config: Config): Promise<ApiKey[]> {
  const keys = parseKeyList(config.apiKeys);
  if (config.apiKeysFile) {
    let text: string;
    try {
      text = await Deno.readTextFile(config.apiKeysFile);
    } catch (e) {
      throw new ConfigError(
        `BROKER_API_KEYS_FILE: cannot read "${config.apiKeysFile}": ${(e as Error).message}`,
      );
    }
    keys.push(...parseKeyFile(text));
  }
  return keys;
}

/** Reads the keys, opens the broker (replaying its WALs) and attaches the metrics. */
export async function openRuntime(
  config: Config,
  log: Logger,
  open: Pick<OpenOptions, "clock"> = {},
): Promise<Runtime> {
  const keys = new KeyRing(await readKeys(config));
  const metrics = new Metrics();
  const broker = await Broker.open(config, { ...open, log, onFsync: metrics.observeFsync });
  metrics.attach(broker);
  return { broker, metrics, keys };
}

/** The handler's hooks for this configuration: API keys, metrics, the access log. */
export function appOptions(config: Config, log: Logger, rt: Runtime): AppOptions {
  const opts: AppOptions = {
    log,
    metrics: rt.metrics,
    before: [],
    after: [metricsHook(rt.metrics)],
  };
  if (authEnabled(config)) opts.before!.push(authHook(rt.keys));
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
