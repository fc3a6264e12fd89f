/**
 * @module The broker on its address: `serve` is Deno.serve, plus listening again when the accept
 * loop ends for good (accept() failed: no file descriptor left, too many clients holding
 * connections), which would otherwise leave the process serving nobody. Under `deno serve
 * main.ts`, Deno listens instead and calls a `DeferredFetch`. Nothing here exits: main.ts turns a
 * ListenError into exit 1.
 */

import type { Config } from "./lib/config.ts";
import type { Logger } from "./lib/log.ts";
import { type BrokerHandler, createHandler } from "./routes/app.ts";
import type { Shards } from "./routes/shards.ts";
import type { Broker } from "./lib/broker.ts";
import type { RecoveryReport } from "./lib/storage/recovery.ts";
import type { BrokerApi, MetricsSource } from "./lib/api.ts";
import { appOptions, authEnabled, nodeUrl, type Runtime, type TlsMaterial } from "./runtime.ts";
import { EgressPolicy } from "./lib/push/egress.ts";

/** Where the broker listens; port 0 picks a free one. Workers share the port (`reusePort`). */
export type Address = { hostname: string; port: number; reusePort?: boolean };

/** The address cannot be had (in use, denied): "cannot listen on HOST:PORT: why". */
export class ListenError extends Error {
  override name = "ListenError";
}

/** The runtime's broker as a request handler, with the hooks this configuration wants. */
export function brokerHandler(
  config: Config,
  rt: Runtime,
  log: Logger,
  shards?: Shards,
  broker: BrokerApi & MetricsSource = rt.broker,
): BrokerHandler {
  return createHandler(broker, { ...appOptions(config, log, rt), shards });
}

/** How a worker of several listens (worker.ts): on the port every worker shares. */
export interface ShardServe {
  handler: BrokerHandler;
  /** The port to share; 0 picks one (the first worker does, and the others take the same). */
  port: number;
  /** Told the port once bound, instead of the "listening" line (the supervisor logs it). */
  onListening: (port: number) => void;
}

/**
 * Serves the broker on BROKER_HOST and PORT, kept listening by a Listener. Once bound it logs
 * "listening" with what start-up recovered, and in a cluster without BROKER_ADVERTISE_URL the
 * address bound becomes this node's URL. When the address cannot be had it logs "cannot listen"
 * and throws a ListenError.
 */
export function serve(config: Config, rt: Runtime, log: Logger, shard?: ShardServe): Listener {
  const { broker, tls } = rt;
  if (shard) {
    const addr = { hostname: config.host, port: shard.port, reusePort: true };
    return listen(addr, shard.handler, log, ({ port }) => shard.onListening(port), tls);
  }
  const onListen = ({ hostname, port }: Deno.NetAddr) => {
    if (broker.cluster) broker.cluster.url = nodeUrl(config, hostname, port);
    log.info("webhook egress", egressFields(config));
    log.info("listening", listeningFields(config, hostname, port, broker.recovery));
  };
  // With TLS the port is shared (reusePort), so new certificates can take over (`replaceTls`).
  const addr = { hostname: config.host, port: config.port, reusePort: tls !== undefined };
  return listen(addr, brokerHandler(config, rt, log), log, onListen, tls);
}

/** How long a shutdown waits for in-flight requests before closing anyway. */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * The end of serving (SIGTERM, or a worker told to stop): the broker drains (parked consumers
 * answered, new work refused), in-flight requests get up to `graceMs`, then, once `also` (a
 * cluster member resigning) has settled, the broker closes. True when every request finished.
 */
export async function stopServing(
  broker: Pick<Broker, "drain" | "close">,
  server: Listener | undefined,
  graceMs = SHUTDOWN_GRACE_MS,
  also?: Promise<unknown>,
): Promise<boolean> {
  const drained = broker.drain();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<string>((res) => timer = setTimeout(() => res("timeout"), graceMs));
  const outcome = server ? await Promise.race([server.shutdown().then(() => "ok"), grace]) : "ok";
  clearTimeout(timer);
  await drained;
  await also;
  await broker.close();
  return outcome === "ok";
}

/** The fields of the "listening" line, with one worker or several. */
export function listeningFields(
  config: Config,
  hostname: string,
  port: number,
  recovery: Pick<RecoveryReport, "topics" | "messages" | "duration_ms">,
): Record<string, unknown> {
  return {
    address: hostname,
    port,
    data_dir: config.dataDir,
    fsync: config.fsync,
    topics: recovery.topics,
    messages: recovery.messages,
    recovery_ms: recovery.duration_ms,
    auth: authEnabled(config),
    tls: config.tlsCert !== "",
  };
}

/** The fields of the "webhook egress" line beside it: what webhooks may not reach. */
export function egressFields(config: Config): Record<string, unknown> {
  return new EgressPolicy(config.webhookDeny, config.webhookAllow).summary();
}

/** First and longest wait between attempts to listen again after the accept loop failed. */
const RELISTEN_FIRST_MS = 100;
const RELISTEN_MAX_MS = 5_000;

/** Deno.serve on `addr`, kept listening; a ListenError when the address cannot be had. */
function listen(
  addr: Address,
  handler: Deno.ServeHandler,
  log: Logger,
  onListen: (addr: Deno.NetAddr) => void,
  tls?: TlsMaterial,
): Listener {
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ ...addr, ...tls, onListen }, handler);
  } catch (e) {
    const error = (e as Error).message;
    log.error("cannot listen", { address: addr.hostname, port: addr.port, error });
    throw new ListenError(
      `cannot listen on ${addr.hostname}:${addr.port}: ${listenAdvice(e as Error)}`,
      { cause: e },
    );
  }
  return new Listener(
    server,
    { ...addr, port: (server.addr as Deno.NetAddr).port },
    handler,
    log,
    tls,
  );
}

/** Why an address cannot be had, without the OS error number, and the setting that mends it. */
function listenAdvice(e: Error): string {
  const why = e.message.replace(/ \(os error \d+\)$/, "");
  if (e instanceof Deno.errors.AddrInUse) {
    return `${why}; another process has this port: stop it or set PORT (--port) to another`;
  }
  if (e instanceof Deno.errors.AddrNotAvailable) {
    return `${why}; set BROKER_HOST (--host) to an address of this machine`;
  }
  if (e instanceof Deno.errors.PermissionDenied) {
    return `${why}; ports below 1024 need privileges: set PORT (--port) to 1024 or above`;
  }
  return why;
}

/**
 * Keeps the broker listening: when the server's accept loop fails, logs it and serves `handler`
 * again on the same address (the port it got), backing off from 100 ms to 5 s, until it succeeds
 * or `shutdown()` is called.
 */
export class Listener {
  #stopping = false;
  /** Resolves once the server has shut down for good (only `shutdown()` does that). */
  readonly finished: Promise<void>;
  /** Servers that new certificates replaced, finishing the connections they hold. */
  readonly #retiring = new Set<Deno.HttpServer>();

  constructor(
    public server: Deno.HttpServer,
    readonly addr: Address,
    readonly handler: Deno.ServeHandler,
    readonly log: Logger,
    public tls?: TlsMaterial,
  ) {
    this.finished = this.#watch();
  }

  /**
   * Serves `tls` from now on without dropping a connection: a server with the new certificate
   * binds the same port (reusePort) and takes the new connections, while the old one stops
   * accepting and finishes the connections it holds (a stream, a socket: until they end).
   */
  replaceTls(tls: TlsMaterial): void {
    const next = this.#serve(tls);
    const old = this.server;
    this.tls = tls;
    this.server = next;
    this.#retiring.add(old);
    old.shutdown().finally(() => this.#retiring.delete(old));
  }

  async #watch(): Promise<void> {
    let waitMs = RELISTEN_FIRST_MS;
    while (true) {
      const current = this.server;
      try {
        await current.finished;
        if (this.server !== current) continue; // replaced (new certificates): watch the new one
        return;
      } catch (e) {
        if (this.#stopping) return;
        if (this.server !== current) continue;
        this.log.error("stopped accepting connections; listening again", {
          error: (e as Error).message,
          retry_ms: waitMs,
        });
      }
      while (!this.#stopping) {
        await new Promise((res) => setTimeout(res, waitMs));
        waitMs = Math.min(waitMs * 2, RELISTEN_MAX_MS);
        try {
          this.server = this.#serve(this.tls);
          this.log.info("listening again", this.addr);
          waitMs = RELISTEN_FIRST_MS;
          break;
        } catch (e) {
          this.log.error("cannot listen yet", { error: (e as Error).message, retry_ms: waitMs });
        }
      }
      if (this.#stopping) return;
    }
  }

  /** Another server of the handler on the same address (with `tls`, HTTPS). */
  #serve(tls: TlsMaterial | undefined): Deno.HttpServer {
    return Deno.serve({ ...this.addr, ...tls, onListen: () => {} }, this.handler);
  }

  /** Stops accepting and waits for the requests under way. */
  async shutdown(): Promise<void> {
    this.#stopping = true;
    await Promise.all([this.server, ...this.#retiring].map((s) => s.shutdown()));
  }
}

/** Whether this process is `deno serve …`, which listens itself and calls the default export. */
export function launchedByDenoServe(): boolean {
  try {
    return Deno.readTextFileSync("/proc/self/cmdline").split("\0")[1] === "serve";
  } catch {
    return false;
  }
}

/**
 * The `{ fetch }` that `deno serve main.ts` calls: 503 "starting" until `ready(handler)` hands
 * it the broker's handler, then that handler.
 */
export class DeferredFetch {
  #handler: ((req: Request) => Promise<Response>) | undefined;

  /** From now on, requests go to `handler`. */
  ready(handler: (req: Request) => Promise<Response>): void {
    this.#handler = handler;
  }

  /** What Deno calls for each request (an arrow: Deno may call it unbound). */
  fetch = (req: Request): Promise<Response> => {
    if (!this.#handler) return Promise.resolve(new Response("starting", { status: 503 }));
    return this.#handler(req);
  };
}
