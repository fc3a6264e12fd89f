/**
 * The broker's real answers against its own OpenAPI document (tests/_support/contract.ts, ajv
 * 2020-12): every operation, successes and refusals (400, 401, 403, 404, 405, 409, 413, 429,
 * 503), each status documented for its operation and each body valid against the documented
 * schema; SSE events, WebSocket frames and the webhook POST against theirs. The last test wants
 * every operation of the document checked at least once, so a new route needs a case here.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../_support/assert.ts";
import { Contract, queryReads } from "../_support/contract.ts";
import type { Res } from "../_support/http.ts";
import { type InProcessBroker, startBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";
import { type Config, VERSION } from "../../lib/config.ts";
import { ROUTES } from "../../routes/app.ts";
import { openApiDocument } from "../../routes/openapi.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

let shared: Contract | undefined;
/** The query parameters each route's handler read, over every case. */
const reads = new Map<string, Set<string>>();
/** The contract cases, and those that ran to the end (a `--filter` run skips the coverage check). */
const cases = new Set<string>();
const passed = new Set<string>();

/** A test case of the contract. */
function contractTest(name: string, fn: () => Promise<void>): void {
  cases.add(name);
  Deno.test(`contract: ${name}`, async () => {
    await fn();
    passed.add(name);
  });
}

/** A broker in memory and the contract, loaded from the first broker's GET /openapi.json. */
async function withContract(
  overrides: Partial<Config>,
  fn: (c: Contract, b: InProcessBroker) => Promise<void>,
): Promise<void> {
  const b = await startBroker({ dataDir: ":memory:", ...overrides }, {
    before: [queryReads(reads)],
  });
  try {
    shared ??= await Contract.load(b);
    await fn(shared, b);
  } finally {
    await b.close();
  }
}

/** Asserts the status (the contract check has passed already); returns the body. */
function expect(res: Res, status: number, code?: string): Json {
  assertEquals(res.status, status, res.text.slice(0, 300));
  if (code) assertEquals(res.body.code, code);
  return res.body;
}

Deno.test("Contract.check refuses an undocumented status, field, code or query parameter", () => {
  const c = new Contract(JSON.parse(JSON.stringify(openApiDocument(ROUTES, VERSION))));
  const res = (status: number, body: unknown, type = "application/json"): Res => ({
    status,
    headers: new Headers({ "content-type": type, "x-request-id": "r" }),
    text: JSON.stringify(body),
    body,
  });
  const problem = (status: number, code: string) => ({
    type: "about:blank",
    title: "x",
    status,
    detail: "x",
    code,
    request_id: "r",
  });
  const message = {
    id: "0190b8a2-0000-7000-8000-000000000001",
    topic: "t",
    payload: "aGk=",
    timestamp: "2026-11-22T00:00:00.000Z",
    retry_count: 0,
    headers: {},
    priority: "normal",
  };
  c.check("GET", "/api/queues/peek?queue=t", res(200, [message]));
  const refused = (fn: () => void, why: RegExp) => assertMatch(assertThrows(fn).message, why);
  refused(() => c.check("GET", "/healthz", res(418, {})), /status 418 is not documented/);
  refused(
    () => c.check("GET", "/api/queues/peek?queue=t", res(200, [{ ...message, extra: 1 }])),
    /additionalProperties/,
  );
  refused(
    () => c.check("GET", "/api/queues/peek?queue=t", res(200, [{ ...message, retry_count: -1 }])),
    /minimum/,
  );
  refused(
    () =>
      c.check(
        "GET",
        "/consume/t",
        res(404, problem(404, "already_exists"), "application/problem+json"),
      ),
    /enum/,
  );
  refused(() => c.check("GET", "/api/queues/peek?queue=t&nope=1", res(200, [])), /"nope" is not/);
  refused(() => c.check("GET", "/api/queues/peek?queue=t&limit=99", res(200, [])), /maximum/);
  refused(() => c.check("GET", "/api/queues", res(200, [], "text/plain")), /text\/plain/);
});

contractTest("publish, consume, ack, requeue, touch and their refusals", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    expect(await call("POST", "/publish/orders", { body: "a" }), 201);
    expect(
      await call("POST", "/publish/orders?ttl=1h&delay=0s&priority=high", {
        body: '{"sku":"a1"}',
        headers: { "content-type": "application/json", "x-mq-trace": "t-1" },
      }),
      201,
    );
    const key = { headers: { "idempotency-key": "k-1" } };
    expect(await call("POST", "/publish/orders", { body: "b", ...key }), 201);
    const dup = expect(await call("POST", "/publish/orders", { body: "b", ...key }), 200);
    assertEquals(dup.deduplicated, true);
    expect(await call("POST", "/publish/orders?idempotency=auto", { body: "c" }), 201);
    expect(await call("POST", "/publish/orders?broadcast=true", { body: "now" }), 200);
    expect(await call("POST", "/publish/orders?delay=1m", { body: "later" }), 201);
    expect(await call("POST", "/publish/bad..name", { body: "x" }), 400, "invalid_name");
    expect(await call("POST", "/publish/orders?ttl=5x", { body: "x" }), 400, "invalid_duration");
    expect(await call("POST", "/publish/orders?priority=urgent", { body: "x" }), 400);
    expect(await call("POST", "/publish/orders", { body: "" }), 400, "empty_body");

    const one = expect(await call("GET", "/consume/orders?group=&auto_ack=false"), 200);
    expect(await call("POST", `/ack/orders/${one.id}`), 204);
    expect(await call("POST", `/ack/orders/${one.id}`), 404, "message_not_found");
    const two = expect(await call("GET", "/consume/orders?limit=2&timeout=0s&visibility=1m"), 200);
    assertEquals(two.length, 2);
    const acked = expect(
      await call("POST", "/ack/orders", { json: { ids: [two[0].id, "x"] } }),
      200,
    );
    assertEquals(acked, { acked: 1, not_found: ["x"] });
    expect(await call("POST", "/ack/orders", { json: { ids: [] } }), 400, "invalid_parameter");
    expect(await call("POST", `/touch/orders/${two[1].id}?by=2m`), 200);
    expect(await call("POST", "/touch/orders/0190b8a2-0000-7000-8000-000000000001"), 404);
    const touched = expect(
      await call("POST", "/touch/orders?by=2m", { json: { ids: [two[1].id, "x"] } }),
      200,
    );
    assertEquals([touched.touched, touched.not_found], [1, ["x"]]);
    expect(await call("POST", "/touch/orders", { json: { ids: [] } }), 400, "invalid_parameter");
    expect(await call("POST", "/requeue?reason=later", { json: two[1] }), 200);
    expect(await call("POST", "/requeue", { json: { id: "nope", topic: "orders" } }), 404);
    expect(await call("POST", "/requeue", { json: {} }), 400, "bad_request");
    expect(await call("POST", "/requeue", { body: "{" }), 400, "bad_request");
    expect(await call("GET", "/consume/orders?limit=0"), 400, "invalid_parameter");
    expect(await call("GET", "/consume/orders?timeout=31s"), 400, "invalid_duration");
    expect(await call("GET", "/consume/orders?filter_val=x"), 400, "invalid_parameter");
    expect(await call("GET", "/consume/empty"), 404, "queue_empty");
    await call("POST", "/publish/orders", { body: '{"sku":"b2"}' });
    expect(await call("GET", "/consume/orders?peek=true&filter_key=sku&filter_val=b2"), 200);
    expect(await call("HEAD", "/consume/orders"), 405);

    await call("POST", "/publish/jobs", { body: "j" });
    for (let i = 1; i <= 3; i++) {
      const m = expect(await call("GET", "/consume/jobs"), 200);
      const r = expect(await call("POST", "/requeue", { json: m }), 200);
      assertEquals(r.status, i < 3 ? "requeued" : "dead_lettered");
    }
    await call("POST", "/publish/jobs", { body: "poison" });
    const poison = expect(await call("GET", "/consume/jobs"), 200);
    const dead = expect(
      await call("POST", "/requeue", { json: { ...poison, dead_letter: true } }),
      200,
    );
    assertEquals(dead.status, "dead_lettered");
  });
});

contractTest("batch publish and its refusals", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    const items = [
      { payload_text: "a", idempotency_key: "k-1", ttl: "1h", priority: "high" },
      { payload: "Yg==", delay: "1m", headers: { "X-MQ-Trace": "t" }, content_type: "text/plain" },
    ];
    const stored = expect(await call("POST", "/publish/orders/batch", { json: items }), 201);
    assertEquals(stored.messages.length, 2);
    const dup = [{ payload_text: "again", idempotency_key: "k-1" }];
    expect(await call("POST", "/publish/orders/batch", { json: dup }), 200);
    expect(
      await call("POST", "/publish/orders/batch?idempotency=auto", {
        body: '{"payload_text":"x"}\n{"payload_text":"x"}\n',
        headers: { "content-type": "application/x-ndjson" },
      }),
      201,
    );
    const bad = [{ payload_text: "a" }, { payload: "!" }];
    expect(await call("POST", "/publish/orders/batch", { json: bad }), 400, "invalid_parameter");
    const late = [{ payload_text: "a", ttl: "5x" }];
    expect(await call("POST", "/publish/orders/batch", { json: late }), 400, "invalid_duration");
    expect(await call("POST", "/publish/orders/batch", { json: [] }), 400, "empty_body");
    expect(await call("POST", "/publish/orders/batch", { body: "[" }), 400, "bad_request");
    expect(await call("POST", "/publish/a..b/batch", { json: items }), 400, "invalid_name");
    const big = [{ payload: "A".repeat(2_900_000) }];
    expect(await call("POST", "/publish/orders/batch", { json: big }), 413, "payload_too_large");
  });
  await withContract({ maxTopics: 1 }, async (c, b) => {
    const call = c.call.bind(c, b);
    const two = { name: "two", max_messages: 2 };
    expect(await call("POST", "/api/topics", { json: two }), 201);
    const three = Array(3).fill({ payload_text: "x" });
    expect(await call("POST", "/publish/two/batch", { json: three }), 429, "queue_full");
    const one = [{ payload_text: "x" }];
    expect(await call("POST", "/publish/other/batch", { json: one }), 403, "topic_limit_reached");
  });
  await withContract({ maxMemoryBytes: 64 * 1024 }, async (c, b) => {
    const big = [{ payload: "A".repeat(96 * 1024) }];
    expect(await c.call(b, "POST", "/publish/m/batch", { json: big }), 429, "memory_full");
  });
});

contractTest("topics, groups, queues, redrive, purge and delete", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    const topic = { name: "billing", policy: "drop-oldest", retain: "1h", visibility: "30s" };
    expect(await call("POST", "/api/topics", { json: { ...topic, max_messages: 10 } }), 201);
    expect(await call("POST", "/api/topics", { json: { name: "billing" } }), 409, "already_exists");
    expect(await call("POST", "/api/topics", { json: { name: "x", policy: "?" } }), 400);
    expect(await call("POST", "/api/topics", { json: { name: "x", retain: "1y" } }), 400);
    expect(await call("POST", "/api/topics"), 400, "empty_body");
    const group = { topic: "billing", group: "audit" };
    expect(await call("POST", "/api/groups", { json: group }), 201);
    expect(await call("POST", "/api/groups", { json: group }), 409, "already_exists");
    expect(await call("POST", "/api/groups", { json: { topic: "billing" } }), 400);
    expect(await call("GET", "/api/groups?topic=billing"), 200);
    expect(await call("GET", "/api/groups?topic=nope"), 404, "not_found");
    expect(await call("GET", "/api/groups"), 400, "invalid_name");

    await call("POST", "/publish/billing", { body: "b" });
    await call("POST", "/publish/jobs", { body: "j" });
    for (let i = 0; i < 3; i++) {
      await call("POST", "/requeue", { json: (await call("GET", "/consume/jobs")).body });
    }
    expect(await call("GET", "/api/queues"), 200);
    expect(await call("GET", "/api/topics"), 200);
    expect(await call("GET", "/api/topics/jobs"), 200);
    expect(await call("GET", "/api/topics/nope"), 404, "not_found");
    expect(await call("GET", "/dashboard/app.js"), 200);
    expect(await call("GET", "/dashboard/nope.txt"), 404, "not_found");
    const dead = expect(await call("GET", "/api/queues/peek?queue=jobs.dlq"), 200);
    expect(
      await call("POST", "/api/queues/redrive?queue=jobs", { json: { ids: [dead[0].id] } }),
      200,
    );
    expect(await call("POST", "/api/queues/redrive?queue=jobs"), 200);
    expect(await call("POST", "/api/queues/redrive?queue=nope"), 404, "not_found");
    expect(await call("DELETE", "/api/queues/purge?queue=billing"), 200);
    expect(await call("DELETE", "/api/queues/purge?queue=nope"), 404, "not_found");
    expect(await call("DELETE", "/api/queues/delete?queue=billing"), 200);
    expect(await call("DELETE", "/api/queues/delete?queue=billing"), 404, "not_found");
    expect(await call("DELETE", "/api/queues/delete"), 400, "invalid_name");
    expect(await call("GET", "/api/topics?all=1"), 400, "bad_request");
    expect(
      await call("POST", "/api/topics", { json: { name: "r", retention: "1h" } }),
      400,
      "bad_request",
    );
    expect(await call("DELETE", "/api/topics/jobs"), 200);
    expect(await call("DELETE", "/api/topics/jobs"), 404, "not_found");
  });
});

contractTest("the dashboard's JSON interface", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    const publish = { queue: "d", payload: "hi", ttl: "1h", delay: "0s", priority: "low" };
    expect(await call("POST", "/api/queues/publish", { json: publish }), 201);
    expect(await call("POST", "/api/queues/publish", { json: { queue: "d", payload: "x" } }), 201);
    const broadcast = { queue: "d", payload: "b", broadcast: true };
    expect(await call("POST", "/api/queues/publish", { json: broadcast }), 200);
    expect(await call("POST", "/api/queues/publish", { json: { queue: "d", payload: "" } }), 400);
    expect(await call("GET", "/api/queues/peek?queue=d&limit=5"), 200);
    expect(await call("GET", "/api/queues/peek?queue=d&limit=11"), 400, "invalid_parameter");
    expect(await call("POST", "/api/queues/consume", { json: { queue: "d" } }), 200);
    const leased = { queue: "d", group: "", auto_ack: false };
    const m = expect(await call("POST", "/api/queues/consume", { json: leased }), 200);
    expect(await call("POST", "/api/queues/consume", { json: { queue: "d" } }), 404, "queue_empty");
    expect(await call("GET", "/api/queues/inflight?queue=d&group=&limit=10"), 200);
    expect(await call("GET", "/api/queues/inflight?queue=d&limit=0"), 400);
    expect(await call("POST", "/api/queues/release", { json: { queue: "d", id: m.id } }), 200);
    expect(await call("POST", "/api/queues/release", { json: { queue: "d", id: m.id } }), 404);
    expect(await call("GET", "/api/queues/webhooks?queue=d"), 200);
    expect(await call("GET", "/api/queues/webhooks?queue=nope"), 404, "not_found");
  });
});

/** A loopback receiver of webhook POSTs; each is handed to `seen`. */
function receiver(seen: (req: Request) => void) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    await req.arrayBuffer();
    seen(req);
    return new Response("ok");
  });
  return { url: `http://127.0.0.1:${server.addr.port}/hook`, close: () => server.shutdown() };
}

contractTest("webhooks, and the POST a receiver gets", async () => {
  let got: (req: Request) => void = () => {};
  const posted = new Promise<Request>((resolve) => got = resolve);
  const hook = receiver((req) => got(req));
  try {
    await withContract({ webhookAllow: LOOPBACK_ALLOW }, async (c, b) => {
      const call = c.call.bind(c, b);
      const reg = { url: hook.url, secret: "s3cret" };
      const w = expect(await call("POST", "/webhook/hooked", { json: reg }), 201);
      expect(await call("POST", "/webhook/hooked", { json: reg }), 409, "already_exists");
      expect(await call("POST", "/webhook/hooked", { json: { url: "ftp://x" } }), 400);
      await call("POST", "/publish/hooked", { body: "pushed", headers: { "x-mq-k": "v" } });
      const req = await posted;
      c.checkWebhook(req.headers);
      assertEquals(req.headers.get("x-mq-k"), "v");
      let attempts: Json[] = [];
      // The attempt is logged once the broker has read the receiver's answer: ask until it is.
      for (let i = 0; i < 500 && attempts.length === 0; i++) {
        if (i) await new Promise((r) => setTimeout(r, 10));
        attempts = expect(await call("GET", `/api/webhooks/${w.id}/attempts`), 200);
      }
      assertEquals(attempts.length, 1);
      expect(await call("GET", "/api/webhooks?topic=hooked"), 200);
      expect(await call("GET", "/api/webhooks"), 200);
      expect(await call("GET", "/api/queues/webhooks?queue=hooked"), 200);
      expect(await call("GET", "/api/webhooks/nope/attempts"), 404, "not_found");
      expect(await call("DELETE", `/api/webhooks/${w.id}`), 200);
      expect(await call("DELETE", `/api/webhooks/${w.id}`), 404, "not_found");
    });
  } finally {
    await hook.close();
  }
});

contractTest("health, stats, rates, metrics, cluster, the reference, unknown paths", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    await call("POST", "/publish/orders", { body: "a" });
    expect(await call("GET", "/healthz"), 200);
    expect(await call("GET", "/api/stats"), 200);
    expect(await call("GET", "/api/rates"), 200);
    expect(await call("GET", "/api/rates?queue=orders"), 200);
    expect(await call("GET", "/api/rates?queue=nope"), 404, "not_found");
    expect(await call("GET", "/metrics"), 200);
    expect(await call("GET", "/api/cluster/status"), 200);
    expect(await call("GET", "/cluster/replicate?node=n1&term=1"), 404, "not_found");
    expect(await call("GET", "/openapi.json"), 200);
    expect(await call("GET", "/asyncapi.json"), 200);
    expect(await call("GET", "/docs"), 200);
    expect(await call("GET", "/docs/init.js"), 200);
    expect(await call("GET", "/docs/nope.js"), 404, "not_found");
    expect(await call("GET", "/nope"), 404, "not_found");
    expect(await call("DELETE", "/healthz"), 405, "method_not_allowed");
    expect(await call("GET", "/publish/orders"), 405, "method_not_allowed");
  });
});

/** Reads an SSE body until it holds `events` events; returns the text. */
async function readEvents(body: ReadableStream<Uint8Array>, events: number): Promise<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while ((text.match(/^data: /gm) ?? []).length < events) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  await reader.cancel();
  return text;
}

/** Opens a stream; the Res for the contract check, and its body. */
async function openStream(b: InProcessBroker, path: string, headers: Record<string, string> = {}) {
  // A stream that never delivers fails the test after 15 s instead of hanging it.
  const res = await fetch(b.url + path, { headers, signal: AbortSignal.timeout(15_000) });
  const checked: Res = { status: res.status, headers: res.headers, text: "", body: undefined };
  return { res, checked };
}

contractTest("SSE events and WebSocket frames", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    const live = await openStream(b, "/stream/live?filter_key=n");
    c.check("GET", "/stream/live?filter_key=n", live.checked);
    await call("POST", "/publish/live", { body: '{"n":1}' });
    await call("POST", "/publish/live?broadcast=true", { body: '{"n":2}' });
    assertEquals(c.checkEvents(await readEvents(live.res.body!, 2)), 2);

    const reset = await openStream(b, "/stream/live", { "last-event-id": "zz" });
    c.check("GET", "/stream/live", reset.checked);
    await call("POST", "/publish/live", { body: "after" });
    const text = await readEvents(reset.res.body!, 2);
    assert(text.startsWith("event: reset"), text);
    assertEquals(c.checkEvents(text), 2);
    expect(await call("GET", "/stream/live?filter_val=x"), 400, "invalid_parameter");

    expect(await call("GET", "/ws"), 400, "bad_request");
    const ws = new WebSocket(b.url.replace(/^http/, "ws") + "/ws");
    const frames: Json[] = [];
    let wake = () => {};
    ws.onmessage = (e) => {
      frames.push(JSON.parse(e.data));
      wake();
    };
    const next = async () => {
      const deadline = Date.now() + 15_000; // a frame that never comes fails, not hangs
      while (!frames.length) {
        assert(Date.now() < deadline, "no frame from the server within 15 s");
        await new Promise<void>((r) => {
          const timer = setTimeout(r, 1_000);
          wake = () => {
            clearTimeout(timer);
            r();
          };
        });
      }
      const f = frames.shift();
      c.checkFrame("server", f);
      return f;
    };
    const send = (f: unknown) => {
      c.checkFrame("client", f);
      ws.send(JSON.stringify(f));
    };
    await new Promise((r) => ws.onopen = r);
    c.record("GET", "/ws", 101);
    try {
      send({ type: "subscribe", topic: "live.*" });
      send({ type: "subscribe", topic: "work", group: "g", prefetch: 1 });
      assertEquals((await next()).type, "subscribed");
      assertEquals((await next()).type, "subscribed");
      await call("POST", "/publish/work", { body: "job" });
      const m = await next();
      assertEquals(m.type, "message");
      send({ type: "ack", topic: "work", id: m.message.id });
      send({ type: "requeue", topic: "work", id: m.message.id, reason: "again" });
      assertEquals((await next()).code, "message_not_found");
      ws.send("{nope");
      assertEquals((await next()).code, "bad_request");
      send({ type: "unsubscribe", topic: "live.*" });
      assertEquals((await next()).type, "unsubscribed");
    } finally {
      const closed = new Promise((r) => ws.onclose = r);
      ws.close();
      await closed;
    }
  });
});

contractTest("SSE event: reset with the number missed, and event: shutdown", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    expect(await call("POST", "/publish/gone", { body: "one" }), 201);
    await call("POST", "/publish/gone", { body: "two" });
    const taken = expect(await call("GET", "/consume/gone?limit=2"), 200);
    expect(await call("POST", `/ack/gone/${taken[1].id}`), 204); // "two" left the topic
    const s = await openStream(b, "/stream/gone", { "last-event-id": "0" });
    c.check("GET", "/stream/gone", s.checked);
    const reader = s.res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const until = async (done: () => boolean) => {
      while (!done()) {
        const { value, done: ended } = await reader.read();
        if (ended) break;
        text += value;
      }
    };
    await until(() => (text.match(/^data: /gm) ?? []).length >= 2);
    assert(text.startsWith("event: reset\n"), text);
    assertMatch(text, /"missed":1/);
    await b.broker.drain();
    await until(() => text.includes("event: shutdown"));
    await until(() => false); // then the stream ends
    assertMatch(text, /event: shutdown\ndata: \{"reason":"the broker is stopping"\}\n\n$/);
    assertEquals(c.checkEvents(text), 3, "reset, the message still held, shutdown");
  });
});

contractTest("401 and 403 with BROKER_API_KEYS", async () => {
  await withContract({ apiKeys: "adm-key:admin,pub-key:publish" }, async (c, b) => {
    const call = c.call.bind(c, b);
    const pub = { authorization: "Bearer pub-key" };
    expect(await call("GET", "/api/stats"), 401, "unauthorized");
    expect(await call("GET", "/api/stats", { headers: { "x-api-key": "wrong" } }), 401);
    expect(await call("GET", "/api/stats", { headers: pub }), 403, "forbidden");
    expect(await call("POST", "/publish/a", { body: "x", headers: pub }), 201);
    expect(await call("GET", "/consume/a", { headers: pub }), 403, "forbidden");
    expect(await call("GET", "/stream/a?api_key=pub-key"), 403, "forbidden");
    expect(await call("GET", "/api/stats", { headers: { "x-api-key": "adm-key" } }), 200);
    expect(await call("GET", "/openapi.json"), 200);
  });
});

contractTest("403 topic_limit_reached, 413, 429 queue_full and memory_full", async () => {
  await withContract({ maxTopics: 2 }, async (c, b) => {
    const call = c.call.bind(c, b);
    const small = { name: "small", max_messages: 1 };
    expect(await call("POST", "/api/topics", { json: small }), 201);
    expect(await call("POST", "/publish/small", { body: "1" }), 201);
    expect(await call("POST", "/publish/small", { body: "2" }), 429, "queue_full");
    expect(await call("POST", "/publish/second", { body: "1" }), 201);
    expect(await call("POST", "/publish/third", { body: "1" }), 403, "topic_limit_reached");
    expect(await call("POST", "/api/topics", { json: { name: "third" } }), 403);
    const big = new Uint8Array(2 * 1024 * 1024 + 1);
    expect(await call("POST", "/publish/second", { body: big }), 413, "payload_too_large");
    const huge = JSON.stringify({ name: "x".repeat(4 * 1024 * 1024) });
    expect(await call("POST", "/api/topics", { body: huge }), 413, "payload_too_large");
  });
  await withContract({ maxMemoryBytes: 64 * 1024 }, async (c, b) => {
    const body = new Uint8Array(48 * 1024);
    expect(await c.call(b, "POST", "/publish/m", { body }), 201);
    expect(await c.call(b, "POST", "/publish/m", { body }), 429, "memory_full");
  });
});

contractTest("drain answers 200, then 503 draining; /healthz 503", async () => {
  await withContract({}, async (c, b) => {
    const call = c.call.bind(c, b);
    expect(await call("POST", "/api/drain"), 200);
    expect(await call("GET", "/api/stats"), 503, "draining");
    expect(await call("POST", "/publish/a", { body: "x" }), 503, "draining");
    expect(await call("GET", "/nope"), 503, "draining");
    expect(await call("GET", "/healthz"), 503);
  });
});

Deno.test("contract: every operation of the document was checked above", () => {
  if (passed.size < cases.size) return; // some cases were filtered out, or failed already
  assertEquals(shared!.unexercised(), [], "add a case for each of these operations");
});

Deno.test("contract: every query parameter a handler read is documented for its operation", () => {
  if (passed.size < cases.size) return;
  assert(reads.size > 20, `reads were recorded for ${reads.size} routes`);
  assertEquals(shared!.undocumentedReads(reads), [], "document these query parameters");
});
