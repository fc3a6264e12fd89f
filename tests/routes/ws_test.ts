/**
 * GET /ws through the HTTP server with Deno's WebSocket client: spy subscriptions on patterns,
 * broadcasts, consuming with prefetch credits, ack and requeue, error frames, API keys, drain,
 * and, with a raw TCP client, Pings, missed Pongs and a client too slow to read.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import {
  assertRawProblem,
  call,
  consume,
  type Json,
  publish,
  rawRequest,
  requeue,
  settle,
  textOf,
} from "../_support/http.ts";
import { parseMetrics, valueOf } from "../_support/metrics.ts";
import { type TestBroker, withBroker } from "../_support/server.ts";
import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { createHandler, ROUTES } from "../../routes/app.ts";
import { MAX_SUBSCRIPTIONS, type WsOptions, wsRoutes } from "../../routes/ws.ts";

/** How long a test waits for a frame before it fails instead of hanging. */
const FRAME_WAIT_MS = 5_000;

/** A WebSocket client whose frames are parsed as JSON and awaited one at a time. */
class Client {
  readonly #frames: Json[] = [];
  readonly #waiting: ((frame: Json) => void)[] = [];
  readonly closed: Promise<CloseEvent>;

  private constructor(readonly ws: WebSocket) {
    ws.addEventListener("message", (e) => {
      const frame = JSON.parse(e.data);
      const wake = this.#waiting.shift();
      if (wake) wake(frame);
      else this.#frames.push(frame);
    });
    this.closed = new Promise((resolve) => ws.addEventListener("close", resolve));
  }

  /** Connects; rejects when the upgrade is refused. */
  static async open(base: string, path = "/ws"): Promise<Client> {
    const c = new Client(new WebSocket(base.replace(/^http/, "ws") + path));
    await new Promise<void>((resolve, reject) => {
      c.ws.addEventListener("open", () => resolve());
      c.ws.addEventListener("error", () => c.closed.then(() => reject(new Error(`no ${path}`))));
    });
    return c;
  }

  send(frame: unknown): void {
    this.ws.send(
      typeof frame === "string" || frame instanceof Uint8Array ? frame : JSON.stringify(frame),
    );
  }

  /** The next frame. */
  next(): Promise<Json> {
    const ready = this.#frames.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(wake), 1);
        reject(new Error(`no frame within ${FRAME_WAIT_MS} ms`));
      }, FRAME_WAIT_MS);
      const wake = (frame: Json) => {
        clearTimeout(timer);
        resolve(frame);
      };
      this.#waiting.push(wake);
    });
  }

  /** The next frame, which must be of `type`. */
  async expect(type: string): Promise<Json> {
    const frame = await this.next();
    assertEquals(frame.type, type, JSON.stringify(frame));
    return frame;
  }

  /** Sends a frame the server always answers; returns the frames that came before the answer. */
  async roundTrip(): Promise<Json[]> {
    this.send({ type: "unsubscribe", topic: "round-trip" });
    const before: Json[] = [];
    for (let f = await this.next(); f.type !== "unsubscribed"; f = await this.next()) {
      before.push(f);
    }
    return before;
  }

  async close(): Promise<CloseEvent> {
    if (this.ws.readyState < WebSocket.CLOSING) this.ws.close();
    return await this.closed;
  }
}

/** A broker (withBroker) and a way to open sockets to it; every socket is closed at the end. */
async function withWs(
  overrides: Parameters<typeof withBroker>[0],
  fn: (ctx: TestBroker, open: (path?: string) => Promise<Client>) => Promise<void>,
): Promise<void> {
  await withBroker(overrides, async (ctx) => {
    const clients: Client[] = [];
    const open = async (path?: string) => {
      const c = await Client.open(ctx.url, path);
      clients.push(c);
      return c;
    };
    try {
      await fn(ctx, open);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
}

/** Subscribes and checks the `subscribed` answer. */
async function subscribe(c: Client, frame: Record<string, unknown>): Promise<void> {
  c.send({ type: "subscribe", ...frame });
  assertEquals(await c.next(), { type: "subscribed", topic: frame.topic });
}

/** The WebSocket handshake request of a raw client. */
function upgradeRequest(path: string): string {
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n` +
    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
    "Sec-WebSocket-Version: 13\r\n\r\n";
}

const OP_TEXT = 0x1;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

/** A WebSocket client on a bare TCP connection: it answers nothing unless told to. */
class RawSocket {
  #buf = new Uint8Array(64 * 1024);
  #start = 0;
  #end = 0;

  private constructor(readonly conn: Deno.Conn) {}

  static async open(base: string, path = "/ws"): Promise<RawSocket> {
    const port = Number(new URL(base).port);
    const raw = new RawSocket(await Deno.connect({ hostname: "127.0.0.1", port }));
    await raw.conn.write(new TextEncoder().encode(upgradeRequest(path)));
    const head = await raw.#until("\r\n\r\n");
    assertMatch(head, /^HTTP\/1\.1 101 /);
    return raw;
  }

  /** Reads up to and including `marker` (the handshake answer). */
  async #until(marker: string): Promise<string> {
    while (true) {
      const text = new TextDecoder().decode(this.#buf.subarray(this.#start, this.#end));
      const at = text.indexOf(marker);
      if (at >= 0) {
        this.#start += at + marker.length; // the answer is ASCII: characters are bytes
        return text.slice(0, at);
      }
      await this.#more();
    }
  }

  async #more(): Promise<void> {
    if (this.#end === this.#buf.length) {
      const kept = this.#buf.subarray(this.#start, this.#end);
      const next = this.#start > this.#buf.length / 2
        ? this.#buf
        : new Uint8Array(this.#buf.length * 2);
      next.set(kept);
      this.#buf = next;
      this.#end = kept.length;
      this.#start = 0;
    }
    const n = await this.conn.read(this.#buf.subarray(this.#end));
    if (n === null) throw new Error("connection closed");
    this.#end += n;
  }

  async #need(n: number): Promise<Uint8Array> {
    while (this.#end - this.#start < n) await this.#more();
    const out = this.#buf.slice(this.#start, this.#start + n);
    this.#start += n;
    return out;
  }

  /** The next frame from the server (unmasked, unfragmented). */
  async frame(): Promise<{ opcode: number; payload: Uint8Array }> {
    const [b0, b1] = await this.#need(2);
    let len = b1! & 0x7f;
    if (len === 126) len = new DataView((await this.#need(2)).buffer).getUint16(0);
    else if (len === 127) len = Number(new DataView((await this.#need(8)).buffer).getBigUint64(0));
    return { opcode: b0! & 0x0f, payload: await this.#need(len) };
  }

  /** Sends one masked frame (payloads under 126 bytes). */
  async send(opcode: number, payload: Uint8Array): Promise<void> {
    const mask = crypto.getRandomValues(new Uint8Array(4));
    const frame = new Uint8Array(6 + payload.length);
    frame.set([0x80 | opcode, 0x80 | payload.length, ...mask]);
    payload.forEach((b, i) => frame[6 + i] = b ^ mask[i % 4]!);
    await this.conn.write(frame);
  }

  /** True once the server has closed the connection (what is left unread is dropped). */
  async ended(): Promise<boolean> {
    try {
      while (true) await this.#more();
    } catch {
      return true;
    }
  }

  close(): void {
    try {
      this.conn.close();
    } catch { /* closed already */ }
  }
}

/** A broker in memory behind a handler with /ws built from `opts`, for timing and bounds. */
async function withWsOptions(
  opts: WsOptions,
  fn: (base: string, broker: Broker) => Promise<void>,
): Promise<void> {
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:" }), { tick: false });
  const routes = [...wsRoutes(opts), ...ROUTES]; // the first /ws wins
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    createHandler(broker, { routes }),
  );
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, broker);
  } finally {
    await server.shutdown();
    await broker.close();
  }
}

const UNKNOWN_ID = "01900000-0000-7000-8000-000000000000";

Deno.test("GET /ws without an upgrade is 400 bad_request", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("GET", "/ws");
    assertEquals(res.status, 400, res.text);
    assertEquals(res.body.code, "bad_request");
    assertMatch(res.body.detail, /WebSocket/);
  });
});

Deno.test("ws: a spy on orders.* hears a topic created later and a dead-letter move", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "orders.*" });
    assertEquals(ctx.broker.feed.count("orders.eu"), 1);
    const p = await publish(ctx, "orders.eu", "first"); // the topic did not exist
    await publish(ctx, "other", "not for orders.*");
    const m = await c.expect("message");
    assertEquals(m.subscription, "orders.*");
    assertEquals(m.message.id, p.id);
    assertEquals(m.message.topic, "orders.eu");
    assertEquals(m.message.payload_text, "first");
    assertEquals(m.message.retry_count, 0);

    await ctx.call("POST", "/api/groups", { json: { topic: "orders.x", group: "billing" } });
    const doomed = await publish(ctx, "orders.x", "doomed");
    assertEquals((await c.expect("message")).message.id, doomed.id);
    for (let i = 0; i < 3; i++) {
      const got = await consume(ctx, "orders.x", "group=billing");
      await requeue(ctx, got, "reason=broken");
    }
    const dead = await c.expect("message");
    assertEquals(dead.subscription, "orders.*");
    assertEquals(dead.message.topic, "orders.x.dlq");
    assertEquals(dead.message.id, doomed.id);
    assertEquals(dead.message.group, "billing"); // the group it failed in
    assertEquals(dead.message.reason, "broken");
    assertEquals(dead.message.retry_count, 3);
    assertEquals(await c.roundTrip(), [], "nothing from other topics");
  });
});

Deno.test("ws: spies count in ferry_stream_subscribers; unsubscribe stops them", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "m.*" });
    await subscribe(c, { topic: "m.*" }); // again: still one subscription
    await publish(ctx, "m.a", "x");
    await c.expect("message");
    const metrics = parseMetrics((await ctx.call("GET", "/metrics")).text);
    assertEquals(valueOf(metrics, "ferry_stream_subscribers", { topic: "m.a" }), 1);
    c.send({ type: "unsubscribe", topic: "m.*" });
    assertEquals(await c.next(), { type: "unsubscribed", topic: "m.*" });
    assertEquals(ctx.broker.feed.count("m.a"), 0);
    await publish(ctx, "m.a", "unheard");
    assertEquals(await c.roundTrip(), []);
  });
});

Deno.test("ws: spies and consuming subscriptions hear broadcasts, which need no ack", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "news" });
    const worker = await open();
    await subscribe(worker, { topic: "news", group: "w", prefetch: 1 });
    const res = await ctx.call("POST", "/publish/news?broadcast=true", { body: "flash" });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { broadcast: true, delivered_to: 2 });
    const m = await c.expect("message");
    assertEquals(m.subscription, "news");
    assertEquals(m.message.payload_text, "flash");
    assertEquals(m.message.topic, "news");
    const w = await worker.expect("message");
    assertEquals(w.message.id, m.message.id);
    worker.send({ type: "ack", topic: "news", id: w.message.id });
    assertEquals((await worker.expect("error")).code, "message_not_found", "nothing was leased");
    await publish(ctx, "news", "stored");
    assertEquals(
      (await worker.expect("message")).message.payload_text,
      "stored",
      "no credit spent",
    );
  });
});

Deno.test("ws: consuming with prefetch 2 holds at most 2 un-acked deliveries; an ack brings the next", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "jobs", group: "workers", prefetch: 2 }); // creates the group
    for (const t of ["j0", "j1", "j2"]) await publish(ctx, "jobs", t);
    const a = await c.expect("message");
    const b = await c.expect("message");
    assertEquals([a, b].map((f) => f.message.payload_text), ["j0", "j1"]);
    assertEquals(a.subscription, "jobs");
    assertEquals(a.message.group, "workers");
    assertEquals(await c.roundTrip(), [], "no third delivery while two are un-acked");
    const stats = (await ctx.call("GET", "/api/stats")).body;
    assertEquals(stats.topics.jobs.groups.workers.in_flight, 2);

    c.send({ type: "ack", topic: "jobs", id: a.message.id });
    const third = await c.expect("message");
    assertEquals(third.message.payload_text, "j2");
    await publish(ctx, "jobs", "j3");
    assertEquals(await c.roundTrip(), [], "j3 waits for a credit");
    c.send({ type: "ack", topic: "jobs", id: b.message.id });
    assertEquals((await c.expect("message")).message.payload_text, "j3");
    const after = (await ctx.call("GET", "/api/stats")).body;
    assertEquals(after.topics.jobs.groups.workers.in_flight, 2);
    assertEquals(after.totals.acked, 2);
  });
});

Deno.test("ws: requeue with a reason gives the message back, and it comes again", async () => {
  await withWs({}, async (ctx, open) => {
    const p = await publish(ctx, "rq", "again");
    const c = await open();
    await subscribe(c, { topic: "rq", prefetch: 1 });
    const first = await c.expect("message");
    assertEquals(first.message.retry_count, 0);
    c.send({ type: "requeue", topic: "rq", id: p.id, reason: "not yet" });
    const second = await c.expect("message");
    assertEquals(second.message.id, p.id);
    assertEquals(second.message.retry_count, 1);
    assertEquals(second.message.reason, "not yet");
    assertEquals(second.message.group, undefined, "the default group is not named");
  });
});

Deno.test("ws: a lease that ends un-acked gives its credit back and the message comes again", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "le", group: "g", prefetch: 1 });
    const p = await publish(ctx, "le", "slow");
    assertEquals((await c.expect("message")).message.id, p.id);
    await ctx.tick(30_001); // BROKER_VISIBILITY 30s
    const again = await c.expect("message");
    assertEquals(again.message.id, p.id);
    assertEquals(again.message.retry_count, 1);
    assertEquals(again.message.reason, "visibility timeout");
  });
});

Deno.test("ws: an ack of an unknown id is an error frame and the socket stays usable", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "u", group: "g" });
    c.send({ type: "ack", topic: "u", id: UNKNOWN_ID });
    const err = await c.expect("error");
    assertEquals(err.code, "message_not_found");
    assert(err.detail.includes(UNKNOWN_ID), err.detail);
    c.send({ type: "requeue", topic: "u", id: UNKNOWN_ID });
    assertEquals((await c.expect("error")).code, "message_not_found");
    c.send({ type: "ack", topic: "not-consumed", id: UNKNOWN_ID });
    assertEquals((await c.expect("error")).code, "not_found");
    await publish(ctx, "u", "still here");
    assertEquals((await c.expect("message")).message.payload_text, "still here");
  });
});

Deno.test("ws: malformed, unknown and incomplete frames get error frames", async () => {
  await withWs({}, async (_ctx, open) => {
    const c = await open();
    const cases: [unknown, string, RegExp][] = [
      ["not json", "bad_request", /Malformed JSON/],
      ["[1,2]", "bad_request", /JSON object/],
      [{ type: "dance" }, "bad_request", /Unknown frame type "dance"/],
      [{ topic: "t" }, "bad_request", /Unknown frame type/],
      [{ type: "subscribe" }, "bad_request", /"topic"/],
      [{ type: "ack", topic: "t" }, "bad_request", /"id"/],
      [{ type: "requeue", topic: "t", id: "x", reason: 5 }, "bad_request", /"reason"/],
      [new Uint8Array([1, 2, 3]), "bad_request", /Binary/],
      [{ type: "subscribe", topic: "orders.*", group: "g" }, "invalid_parameter", /pattern/],
      [{ type: "subscribe", topic: "t", prefetch: 0 }, "invalid_parameter", /prefetch/],
      [{ type: "subscribe", topic: "t", prefetch: 1001 }, "invalid_parameter", /prefetch/],
      [{ type: "subscribe", topic: "t", prefetch: "5" }, "invalid_parameter", /prefetch/],
      [{ type: "subscribe", topic: "bad name!" }, "invalid_name", /bad name!/],
      [{ type: "subscribe", topic: "t", group: "bad/group" }, "invalid_name", /group/],
    ];
    for (const [frame, code, detail] of cases) {
      c.send(frame);
      const err = await c.expect("error");
      assertEquals(err.code, code, `${JSON.stringify(frame).slice(0, 80)}: ${err.detail}`);
      assertMatch(err.detail, detail);
      assertEquals(Object.keys(err).sort(), ["code", "detail", "type"]);
    }
    await subscribe(c, { topic: "fine" }); // still usable
    await subscribe(c, { topic: "one", group: "a" });
    c.send({ type: "subscribe", topic: "one", group: "b" });
    assertEquals((await c.expect("error")).code, "already_exists");
  });
});

Deno.test("ws: ?api_key= is accepted; a key without the consume scope is refused before the upgrade", async () => {
  const apiKeys = "con-key-1:consume,pub-key-2:publish";
  await withWs({ apiKeys }, async (ctx, open) => {
    const c = await open("/ws?api_key=con-key-1");
    await subscribe(c, { topic: "keyed" });
    const forbidden = await rawRequest(ctx.url, upgradeRequest("/ws?api_key=pub-key-2"));
    assertRawProblem(forbidden, 403, "forbidden");
    const missing = await rawRequest(ctx.url, upgradeRequest("/ws"));
    assertRawProblem(missing, 401, "unauthorized");
    let refused = false;
    await Client.open(ctx.url, "/ws?api_key=pub-key-2").then(
      (x) => x.close(),
      () => refused = true,
    );
    assert(refused, "the WebSocket client cannot open with a publish-only key");
  });
});

Deno.test("ws: a drain closes every socket with 1001; later upgrades get 503", async () => {
  await withWs({}, async (ctx, open) => {
    const spy = await open();
    await subscribe(spy, { topic: "d.*" });
    const consumer = await open();
    await subscribe(consumer, { topic: "d1", group: "g" });
    const idle = await open();
    assertEquals((await ctx.call("POST", "/api/drain")).status, 200);
    for (const c of [spy, consumer, idle]) {
      const ev = await c.closed;
      assertEquals(ev.code, 1001);
      assertEquals(ev.reason, "The broker is draining");
    }
    assertRawProblem(await rawRequest(ctx.url, upgradeRequest("/ws")), 503, "draining");
  });
});

Deno.test("ws: closing the socket removes its subscriptions; what it held comes back after the lease", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "cl.*" });
    await subscribe(c, { topic: "cl", group: "g", prefetch: 2 });
    const held = await publish(ctx, "cl", "held");
    assertEquals((await c.expect("message")).message.id, held.id);
    await c.close();
    for (let i = 0; i < 50 && ctx.broker.feed.count("cl.x") > 0; i++) await settle(ctx);
    assertEquals(ctx.broker.feed.count("cl.x"), 0);
    await publish(ctx, "cl", "next");
    assertEquals(textOf(await consume(ctx, "cl", "group=g")), "next", "the consumer is gone");
    await ctx.tick(30_001);
    const back = await consume(ctx, "cl", "group=g");
    assertEquals(back.id, held.id);
    assertEquals(back.retry_count, 1);
  });
});

Deno.test("ws: deleting a consumed topic ends the subscription with an error frame", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "gone", group: "g" });
    const res = await ctx.call("DELETE", "/api/queues/delete?queue=gone");
    assertEquals(res.status, 200, res.text);
    const err = await c.expect("error");
    assertEquals(err.code, "not_found");
    assertMatch(err.detail, /"gone" ended/);
    await subscribe(c, { topic: "gone", group: "g" }); // may subscribe again
  });
});

Deno.test("ws: the server pings a silent client, and a client that answers stays open", async () => {
  const pingMs = 250;
  await withWsOptions({ pingMs }, async (base) => {
    const raw = await RawSocket.open(base);
    try {
      for (let i = 0; i < 3; i++) {
        const f = await raw.frame();
        assertEquals(f.opcode, OP_PING, `frame ${i}`);
        await raw.send(OP_PONG, f.payload);
      }
      await raw.send(OP_CLOSE, new Uint8Array([0x03, 0xe8])); // 1000
      const answer = await raw.frame();
      assertEquals(answer.opcode, OP_CLOSE);
      assertEquals((answer.payload[0]! << 8) | answer.payload[1]!, 1000);
    } finally {
      raw.close();
    }
  });
});

Deno.test("ws: a client that never answers a Ping is closed with 1001", async () => {
  const pingMs = 250;
  await withWsOptions({ pingMs }, async (base) => {
    const raw = await RawSocket.open(base);
    try {
      const ping = await raw.frame();
      assertEquals(ping.opcode, OP_PING);
      const pingedAt = performance.now();
      const close = await raw.frame();
      const waited = performance.now() - pingedAt;
      assertEquals(close.opcode, OP_CLOSE);
      assertEquals((close.payload[0]! << 8) | close.payload[1]!, 1001);
      assertEquals(
        new TextDecoder().decode(close.payload.subarray(2)),
        "No response from ping frame.",
      );
      assert(waited >= pingMs * 0.8, `closed ${waited} ms after the Ping`);
      assert(await raw.ended());
    } finally {
      raw.close();
    }
  });
});

Deno.test("ws: a spy whose client stops reading is dropped, not buffered without bound", async () => {
  await withWsOptions({ maxBufferedBytes: 64 * 1024 }, async (base, broker) => {
    const raw = await RawSocket.open(base);
    try {
      const sub = new TextEncoder().encode(JSON.stringify({ type: "subscribe", topic: "big" }));
      await raw.send(OP_TEXT, sub);
      const subscribed = await raw.frame();
      assertEquals(JSON.parse(new TextDecoder().decode(subscribed.payload)).type, "subscribed");
      // The client reads nothing more; the kernel's buffers fill, then the socket's own.
      const payload = new Uint8Array(1024 * 1024).fill(0x61);
      let published = 0;
      while (broker.feed.count("big") > 0 && published < 200) {
        await broker.publish("big", payload);
        published++;
      }
      assertEquals(broker.feed.count("big"), 0, `still subscribed after ${published} MiB`);
      let last: Json;
      do {
        const f = await raw.frame();
        assertEquals(f.opcode, OP_TEXT);
        last = JSON.parse(new TextDecoder().decode(f.payload));
      } while (last.type === "message");
      assertEquals(last.type, "error");
      assertEquals(last.code, "unavailable");
      assertMatch(
        last.detail,
        /Subscription "big" dropped: fell behind: \d+ bytes wait to be sent/,
      );
    } finally {
      raw.close();
    }
  });
});

Deno.test("ws: frames a message subscription sends carry the Message object", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "shape" });
    const p = await publish(ctx, "shape", '{"a":1}', "priority=high", { "X-MQ-Trace": "t-1" });
    const m = await c.expect("message");
    assertEquals(Object.keys(m).sort(), ["message", "subscription", "type"]);
    assertEquals(m.message.id, p.id);
    assertEquals(m.message.payload, btoa('{"a":1}'));
    assertEquals(m.message.priority, "high");
    assertEquals(m.message.headers, { "x-mq-trace": "t-1" });
    assertEquals(m.message.timestamp, p.timestamp);
    const direct = await call(ctx, "GET", "/api/queues/peek?queue=shape");
    assertEquals(direct.body[0], m.message, "the same Message object as peek");
  });
});

Deno.test("ws: a drain closes a socket that holds no subscription too", async () => {
  await withWs({}, async (ctx, open) => {
    const idle = await open(); // the only socket: no spy or consumer hears the drain for it
    assertEquals((await ctx.call("POST", "/api/drain")).status, 200);
    const ev = await idle.closed;
    assertEquals([ev.code, ev.reason], [1001, "The broker is draining"]);
  });
});

Deno.test("ws: a frame over 64 KiB gets payload_too_large and closes the socket with 1009", async () => {
  await withWs({}, async (_ctx, open) => {
    const c = await open();
    await subscribe(c, { topic: "fine" });
    c.send(JSON.stringify({ type: "subscribe", topic: "x".repeat(70_000) }));
    const err = await c.expect("error");
    assertEquals(err.code, "payload_too_large");
    assertMatch(err.detail, /Frame too large: 70031 bytes; at most 65536: the socket is closed/);
    const ev = await c.closed;
    assertEquals([ev.code, ev.reason], [1009, "Frame too large"]);
    const other = await open(); // the broker keeps serving
    await subscribe(other, { topic: "fine" });
  });
});

Deno.test("ws: a socket holds at most 100 subscriptions; the next is refused with subscriptions_full", async () => {
  await withWs({}, async (ctx, open) => {
    const c = await open();
    for (let i = 0; i < MAX_SUBSCRIPTIONS - 1; i++) c.send({ type: "subscribe", topic: `p${i}x*` });
    for (let i = 0; i < MAX_SUBSCRIPTIONS - 1; i++) await c.expect("subscribed");
    await subscribe(c, { topic: "last", group: "g" }); // consuming ones count too: the 100th
    c.send({ type: "subscribe", topic: "one-more*" });
    const err = await c.expect("error");
    assertEquals(err.code, "subscriptions_full");
    assertMatch(
      err.detail,
      /Cannot subscribe to "one-more\*": this socket holds 100 subscriptions/,
    );
    c.send({ type: "subscribe", topic: "one-more", group: "g" });
    assertEquals((await c.expect("error")).code, "subscriptions_full");
    await subscribe(c, { topic: "p1x*" }); // one it holds is confirmed again, not refused
    c.send({ type: "unsubscribe", topic: "p0x*" });
    await c.expect("unsubscribed");
    await subscribe(c, { topic: "one-more*" }); // room again
    await publish(ctx, "one-more-topic", "heard");
    assertEquals((await c.expect("message")).message.payload_text, "heard");
  });
});

Deno.test("ws: past BROKER_WS_MAX_SOCKETS_PER_KEY a key's next upgrade is 429 too_many_sockets", async () => {
  const apiKeys = "key-one-aaaa:consume name=one,key-two-bbbb:consume name=two";
  await withWs({ apiKeys, wsMaxSocketsPerKey: 2, wsMaxSockets: 3 }, async (ctx, open) => {
    const first = await open("/ws?api_key=key-one-aaaa");
    await open("/ws?api_key=key-one-aaaa");
    const refused = await rawRequest(ctx.url, upgradeRequest("/ws?api_key=key-one-aaaa"));
    assertRawProblem(refused, 429, "too_many_sockets");
    assertMatch(
      JSON.parse(refused.body).detail,
      /API key "one" holds 2 open sockets, the most one key may/,
    );
    assertMatch(JSON.parse(refused.body).detail, /raise BROKER_WS_MAX_SOCKETS_PER_KEY/);
    assert(Number(refused.headers.get("retry-after")) >= 1, "429 with Retry-After");
    // Another key has its own count, up to the broker's total.
    const other = await open("/ws?api_key=key-two-bbbb");
    await subscribe(other, { topic: "still-served" });
    const full = await rawRequest(ctx.url, upgradeRequest("/ws?api_key=key-two-bbbb"));
    assertRawProblem(full, 429, "too_many_sockets");
    assertMatch(
      JSON.parse(full.body).detail,
      /the broker holds 3 open sockets, the most it may \(BROKER_WS_MAX_SOCKETS\)/,
    );
    // A socket that closes gives its place back.
    await first.close();
    await eventuallyOpens(ctx.url, "/ws?api_key=key-one-aaaa");
  });
});

Deno.test("ws: with auth off, BROKER_WS_MAX_SOCKETS_PER_KEY counts the sockets of one client address", async () => {
  await withWs({ wsMaxSocketsPerKey: 1 }, async (ctx, open) => {
    await open();
    const refused = await rawRequest(ctx.url, upgradeRequest("/ws"));
    assertRawProblem(refused, 429, "too_many_sockets");
    assertMatch(
      JSON.parse(refused.body).detail,
      /client 127\.0\.0\.1 holds 1 open socket, the most one client address may/,
    );
  });
});

/** Opens a socket once the broker has counted a closed one out (its close is heard a turn later). */
async function eventuallyOpens(base: string, path: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const res = await rawRequest(base, upgradeRequest(path));
    if (res.status === 101) return;
    assertRawProblem(res, 429, "too_many_sockets");
  }
  throw new Error(`${path} still refused after 100 tries`);
}
