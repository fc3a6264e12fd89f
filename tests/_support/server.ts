/**
 * Test support: a real broker and Deno.serve on a loopback port in this process, wired as
 * production wires it, with a clock the test moves by hand; `withBroker` always closes it.
 */

import type { Broker } from "../../lib/broker.ts";
import { type Config, defaultConfig } from "../../lib/config.ts";
import { Logger } from "../../lib/log.ts";
import { createHandler } from "../../routes/app.ts";
import type { BeforeHook } from "../../routes/router.ts";
import { appOptions, openRuntime, type Runtime } from "../../runtime.ts";
import { call, type CallInit, type Res } from "./http.ts";
import type { Resolve } from "../../net/webhook_sender.ts";

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
 * production, then `before` (a test's own hooks). `log` receives the broker's log lines (default:
 * none); `resolve` answers for webhook hosts instead of DNS. Webhooks to the test's own loopback
 * receivers need `webhookAllow: LOOPBACK_ALLOW` (lib/push/egress.ts), as in production.
 */
export async function startBroker(
  overrides: Partial<Config> = {},
  opts: { clock?: () => number; log?: Logger; before?: BeforeHook[]; resolve?: Resolve } = {},
): Promise<InProcessBroker> {
  const dataDir = overrides.dataDir ?? await Deno.makeTempDir({ prefix: "ferry-test-" });
  const config = defaultConfig({ port: 0, logLevel: "error", ...overrides, dataDir });
  const log = opts.log ?? new Logger(config.logLevel, () => {});
  const runtime = await openRuntime(config, log, { clock: opts.clock, resolve: opts.resolve });
  const { broker } = runtime;
  const options = appOptions(config, log, runtime);
  options.before = [...options.before ?? [], ...opts.before ?? []];
  const handler = createHandler(broker, options);
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

/**
 * Runs `fn` against a broker on the real clock, which sweeps by itself (leases and long polls
 * end in real time: for clients that keep their own timers), and always closes it.
 */
export async function withLiveBroker(
  fn: (b: InProcessBroker) => Promise<void>,
  overrides: Partial<Config> = {},
): Promise<void> {
  const b = await startBroker(overrides);
  try {
    await fn(b);
  } finally {
    await b.close();
  }
}

/** A clock the test moves by hand; the broker reads `fn`. */
export class Clock {
  now = Date.now();
  readonly fn = (): number => this.now;
  advance(ms: number): number {
    this.now += ms;
    return this.now;
  }
}

/** A running broker plus the test's clock and helpers bound to its URL. */
export interface TestBroker extends InProcessBroker {
  clock: Clock;
  call(method: string, path: string, init?: CallInit): Promise<Res>;
  /** Starts a request without awaiting it; aborted at the end of the test if still open. */
  start(method: string, path: string, init?: CallInit): Promise<Res>;
  /** Moves the clock on and runs the broker's sweep at the new time. */
  tick(ms: number): Promise<void>;
}

/** Runs `fn` against a fresh broker and always closes it (and aborts open requests); `log` hears its lines. */
export async function withBroker(
  overrides: Partial<Config>,
  fn: (ctx: TestBroker) => Promise<void>,
  clock = new Clock(),
  log?: Logger,
): Promise<void> {
  const b = await startBroker(overrides, { clock: clock.fn, log });
  const ctx = bind(b, clock);
  try {
    await fn(ctx);
  } finally {
    await ctx.abortAll();
    await b.close();
  }
}

/** Binds the helpers to a started broker; `abortAll` ends requests still pending. */
export function bind(
  b: InProcessBroker,
  clock: Clock,
): TestBroker & { abortAll(): Promise<void> } {
  const pending = new Set<{ ac: AbortController; p: Promise<unknown> }>();
  return {
    ...b,
    clock,
    call: (method, path, init) => call(b.url, method, path, init),
    start(method, path, init = {}) {
      const ac = new AbortController();
      const p = call(b.url, method, path, { ...init, signal: ac.signal });
      const entry = { ac, p: p.catch(() => {}) };
      pending.add(entry);
      p.finally(() => pending.delete(entry)).catch(() => {});
      return p;
    },
    async tick(ms) {
      await b.broker.sweep(clock.advance(ms));
    },
    async abortAll() {
      for (const e of pending) e.ac.abort();
      await Promise.all([...pending].map((e) => e.p));
    },
  };
}

/**
 * Builds a broker state that exercises every figure: "orders" (a named group, in-flight, acked
 * and delayed messages), "jobs" with one message dead-lettered into "jobs.dlq", and "temp" with
 * one message expired by its TTL.
 */
export async function busyState(ctx: TestBroker): Promise<void> {
  const ok = async (method: string, path: string, init: CallInit = {}) => {
    const res = await ctx.call(method, path, init);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  await ok("POST", "/api/groups", { json: { topic: "orders", group: "billing" } });
  for (let i = 0; i < 5; i++) await ok("POST", "/publish/orders", { body: `o${i}` });
  await ok("POST", "/publish/orders?delay=1m", { body: "later" });
  const [first] = await ok("GET", "/consume/orders?limit=2");
  await ok("POST", `/ack/orders/${first.id}`);
  await ok("GET", "/consume/orders?group=billing");

  await ok("POST", "/publish/jobs", { body: "j" });
  for (let i = 0; i < 3; i++) {
    const m = await ok("GET", "/consume/jobs");
    await ok("POST", "/requeue", { json: m });
  }
  await ok("POST", "/publish/temp?ttl=1s", { body: "t" });
  await ok("POST", "/publish/temp", { body: "stays" });
  await ctx.tick(2_000);
}

/** Resolves once the broker's feed gets its next subscriber on `topic` (a stream opened). */
export function nextSubscriber(broker: Broker, topic: string): Promise<void> {
  const feed = broker.feed;
  const original = feed.subscribe;
  return new Promise((resolve) => {
    feed.subscribe = (pattern, fn, opts) => {
      const off = original.call(feed, pattern, fn, opts);
      if (pattern === topic) {
        feed.subscribe = original;
        resolve();
      }
      return off;
    };
  });
}
