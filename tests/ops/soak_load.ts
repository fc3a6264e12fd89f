/**
 * The soak campaign's load (tests/ops/soak.ts runs and samples it): paced publishers, batch
 * consumers with batch acks and some requeues, long-polls that time out or are aborted, admin
 * reads, clients that leave mid-request, and connections held silent or half-sent throughout.
 */

import { parseMetrics } from "../_support/metrics.ts";
import type { QueueItem } from "../_support/http.ts";

const JSON_HEADERS = { "content-type": "application/json" };

/** Lease of the soak topics: a message answered to a long-poll that aborted is back this soon. */
const VISIBILITY = "5s";
/** A topic that gets 0.5 % of the publishes, so long-polls on it park, time out, get aborted. */
export const IDLE_TOPIC = "soak-idle";
const IDLE_SHARE = 0.005;
const REQUEUE_SHARE = 0.02;
const LONG_POLLERS = 4;
/** Connections opened before the load and held, silent or half-sent, until it stops. */
export const HELD_CONNS = 4;

/** What the load reads of the soak's options. */
export interface LoadShape {
  ratePerSec: number;
  payloadBytes: number;
}

/** GET /api/queues summed over the soak's topics. */
export interface Totals {
  depth: number;
  inFlight: number;
  held: number;
  /** Ready, in flight and delayed: what a drain still has to take. */
  pending: number;
  deadLettered: number;
  topics: number;
}

/** Resolves after `ms`, or at once when `signal` aborts, leaving no timer behind. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => (clearTimeout(timer), signal?.removeEventListener("abort", done), resolve());
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done);
  });
}

/** A signal that fires after `ms` or with `also`; `clear()` drops its timer. */
function deadline(ms: number, also?: AbortSignal) {
  const own = new AbortController();
  const timer = setTimeout(() => own.abort(), ms);
  const signal = also ? AbortSignal.any([own.signal, also]) : own.signal;
  return { signal, clear: () => clearTimeout(timer) };
}

const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
const sum = <T>(xs: T[], f: (x: T) => number) => xs.reduce((a, x) => a + f(x), 0);
export const maxOf = <T>(xs: T[], f: (x: T) => number) => Math.max(...xs.map(f));
const encode = (s: string) => new TextEncoder().encode(s);

/** The load: every worker shares one HTTP client, so closing it closes their connections. */
export class Load {
  readonly client = Deno.createHttpClient({});
  readonly stopLoad = new AbortController();
  readonly stopConsumers = new AbortController();
  readonly statuses: Record<string, number> = {};
  readonly held: Deno.TcpConn[] = [];
  readonly topics: string[];
  readonly payload: string;
  readonly port: number;
  published = 0;
  acked = 0;
  requeued = 0;
  transportErrors = 0;
  #issued = 0;
  #t0 = 0;

  constructor(readonly url: string, readonly o: LoadShape, topics: string[]) {
    this.topics = topics;
    this.payload = "x".repeat(o.payloadBytes);
    this.port = Number(new URL(url).port);
  }

  get live(): boolean {
    return !this.stopLoad.signal.aborted;
  }

  async call(path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
    try {
      const res = await fetch(this.url + path, { ...init, client: this.client });
      const text = await res.text();
      this.statuses[res.status] = (this.statuses[res.status] ?? 0) + 1;
      return { status: res.status, text };
    } catch {
      if (!init.signal?.aborted) this.transportErrors++;
      return { status: 0, text: "" };
    }
  }

  post(path: string, json: unknown) {
    return this.call(path, { method: "POST", body: JSON.stringify(json), headers: JSON_HEADERS });
  }

  /** GET /api/queues summed over the topics (their `.dlq`s only as dead letters). */
  async totals(): Promise<Totals | undefined> {
    const r = await this.call("/api/queues");
    if (r.status !== 200) return undefined;
    const all = JSON.parse(r.text) as QueueItem[];
    const qs = all.filter((q) => !q.name.endsWith(".dlq"));
    return {
      depth: sum(qs, (q) => q.depth),
      inFlight: sum(qs, (q) => q.in_flight),
      held: sum(qs, (q) => q.held),
      pending: sum(qs, (q) => q.depth + q.in_flight + q.delayed),
      deadLettered: sum(qs, (q) => q.dlq_depth),
      topics: all.length,
    };
  }

  /** The 5xx answers in the broker's ferry_http_requests_total. */
  async broker5xx(): Promise<number | undefined> {
    const r = await this.call("/metrics");
    if (r.status !== 200) return undefined;
    return sum(
      parseMetrics(r.text),
      (s) => s.name === "ferry_http_requests_total" && s.labels.code?.startsWith("5") ? s.value : 0,
    );
  }

  /** Opens the held connections: half of them silent, half with a request head cut short. */
  async holdOpen(): Promise<void> {
    for (let i = 0; i < HELD_CONNS; i++) {
      this.held.push(await Deno.connect({ hostname: "127.0.0.1", port: this.port }));
      if (i % 2) await this.held[i]!.write(encode("GET /healthz HTTP/1.1\r\nhost: localhost\r\n"));
    }
  }

  /** Counts the held connections the broker has closed or answered, and closes them all. */
  async releaseHeld(): Promise<number> {
    const acted = await Promise.all(
      this.held.splice(0).map(async (conn) => {
        const timer = new AbortController();
        const read = conn.read(new Uint8Array(1024)).then(() => true, () => true);
        const seen = await Promise.race([read, sleep(300, timer.signal).then(() => false)]);
        timer.abort();
        conn.close();
        await read;
        return seen;
      }),
    );
    return acted.filter(Boolean).length;
  }

  /** Runs every worker; resolves once the load and then the consumers are stopped. */
  run(): Promise<unknown> {
    this.#t0 = performance.now();
    const publishers = Math.min(64, Math.max(8, Math.ceil(this.o.ratePerSec / 50)));
    return Promise.all([
      ...Array.from({ length: publishers }, () => this.publisher()),
      ...[...this.topics, IDLE_TOPIC].map((t) => this.consumer(t)),
      ...Array.from({ length: LONG_POLLERS }, (_, k) => this.longPoller(k)),
      this.ops(),
      this.abandoner(),
    ]);
  }

  /** Publishers share one schedule, the n-th publish due at n / rate s; never bursts over 1 s. */
  async publisher(): Promise<void> {
    const rate = this.o.ratePerSec;
    while (this.live) {
      const elapsed = performance.now() - this.#t0;
      const due = Math.floor(elapsed * rate / 1000);
      this.#issued = Math.max(this.#issued, due - rate);
      if (this.#issued >= due) {
        await sleep((this.#issued + 1) * 1000 / rate - elapsed, this.stopLoad.signal);
        continue;
      }
      this.#issued++;
      const topic = Math.random() < IDLE_SHARE ? IDLE_TOPIC : pick(this.topics);
      const r = await this.call(`/publish/${topic}`, { method: "POST", body: this.payload });
      if (r.status === 201) this.published++;
    }
  }

  /** Takes 1..100 (long-polling 1 s), sometimes requeues the first, batch-acks the rest. */
  async consumer(topic: string): Promise<void> {
    while (!this.stopConsumers.signal.aborted) {
      const limit = 1 + Math.floor(Math.random() * 100);
      const r = await this.call(`/consume/${topic}?limit=${limit}&timeout=1s`);
      if (r.status === 0) await sleep(100, this.stopConsumers.signal);
      if (r.status !== 200) continue;
      const got = [JSON.parse(r.text)].flat() as { id: string; retry_count: number }[];
      if (Math.random() < REQUEUE_SHARE && got[0]!.retry_count === 0) {
        const q = await this.post("/requeue?reason=soak", got[0]);
        if (q.status === 200) this.requeued++, got.shift();
      }
      if (!got.length) continue;
      const a = await this.post(`/ack/${topic}`, { ids: got.map((m) => m.id) });
      if (a.status === 200) this.acked += (JSON.parse(a.text) as { acked: number }).acked;
    }
  }

  /** Long-polls 5 s, half on the idle topic; a random 0-7 s abort disconnects some of them. */
  async longPoller(k: number): Promise<void> {
    while (this.live) {
      const topic = k % 2 ? IDLE_TOPIC : pick(this.topics);
      const { signal, clear } = deadline(Math.random() * 7_000, this.stopLoad.signal);
      const r = await this.call(`/consume/${topic}?timeout=5s&limit=10`, { signal });
      clear();
      if (r.status !== 200) continue;
      for (const m of [JSON.parse(r.text)].flat() as { id: string }[]) {
        const a = await this.call(`/ack/${topic}/${m.id}`, { method: "POST" });
        if (a.status === 204) this.acked++;
      }
    }
  }

  /** Peeks, lists the queues or scrapes /metrics, one every 300 ms. */
  async ops(): Promise<void> {
    for (let i = 0; this.live; i++) {
      const peek = `/api/queues/peek?queue=${pick(this.topics)}&limit=10`;
      await this.call([peek, "/api/queues", "/metrics"][i % 3]!);
      await sleep(300, this.stopLoad.signal);
    }
  }

  /** Every 200 ms a client leaves mid-request: a cut body, a cut request line, an aborted stream. */
  async abandoner(): Promise<void> {
    const half = this.payload.slice(0, this.payload.length >> 1);
    for (let i = 0; this.live; i++) {
      const path = `/publish/${pick(this.topics)}`;
      if (i % 3 === 2) {
        const body = new ReadableStream({ start: (c) => c.enqueue(encode(half)) });
        const { signal, clear } = deadline(20);
        await this.call(path, { method: "POST", body, signal });
        clear();
      } else {
        const cl = `host: localhost\r\ncontent-length: ${this.o.payloadBytes}`;
        const head = i % 3 ? `GET /consume/x?li` : `POST ${path} HTTP/1.1\r\n${cl}\r\n\r\n${half}`;
        try {
          const conn = await Deno.connect({ hostname: "127.0.0.1", port: this.port });
          await conn.write(encode(head)).finally(() => conn.close());
        } catch {
          this.transportErrors++;
        }
      }
      await sleep(200, this.stopLoad.signal);
    }
  }
}

/** Creates the topics and sends one message round each, on a client of its own that it closes. */
export async function setUp(url: string, topics: string[]): Promise<void> {
  const client = Deno.createHttpClient({});
  const call = async (path: string, body?: string) => {
    const method = body === undefined ? "GET" : "POST";
    const res = await fetch(url + path, { method, body, client });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`set-up: ${path} answered ${res.status}: ${text}`);
    return text;
  };
  try {
    for (const name of topics) {
      await call("/api/topics", JSON.stringify({ name, visibility: VISIBILITY }));
      await call(`/publish/${name}`, "set-up");
      await call(`/ack/${name}/${JSON.parse(await call(`/consume/${name}`)).id}`, "");
    }
  } finally {
    client.close();
  }
}
