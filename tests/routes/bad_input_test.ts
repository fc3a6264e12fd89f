/**
 * Bad input through the HTTP server: names, durations, limits, JSON bodies, methods, unknown
 * routes, oversized bodies, and a hammer of mixed bad requests after which the broker still works.
 */

import { assert, assertEquals, Failures } from "../_support/assert.ts";
import { exists } from "../_support/files.ts";
import { assertProblem, type CallInit, consume, publish } from "../_support/http.ts";
import { type TestBroker, withBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";

const MB2 = 2 * 1024 * 1024;
const TOKEN = `escape-${crypto.randomUUID().slice(0, 8)}`;

/** Bad names as they go in a URL path segment (percent-encoded where needed). */
const BAD_NAMES = [
  "a..b",
  `%2e%2e%2f${TOKEN}`,
  `..%2f..%2f${TOKEN}`,
  `%2e%2e%5c${TOKEN}`,
  ".hidden",
  ".dlq",
  "a".repeat(201),
  "a%20b",
  "caf%C3%A9",
  "%E2%9C%93",
  "a%2Fb",
  "a%00b",
  "a:b",
  "a*",
];

/** A name as a query value or JSON string. */
function decoded(segment: string): string {
  return decodeURIComponent(segment);
}

/** Every place a topic or group name goes, for one bad name. */
function nameCalls(seg: string): [string, string, CallInit?][] {
  const q = encodeURIComponent(decoded(seg));
  const id = "01890000-0000-7000-8000-000000000000";
  return [
    ["POST", `/publish/${seg}`, { body: "x" }],
    ["GET", `/consume/${seg}`],
    ["POST", `/ack/${seg}/${id}`],
    ["POST", `/ack/${seg}`, { json: { ids: [id] } }],
    ["POST", `/touch/${seg}/${id}?by=30s`],
    ["GET", `/consume/ok?group=${q}`],
    ["POST", `/ack/ok/${id}?group=${q}`],
    ["POST", "/api/topics", { json: { name: decoded(seg) } }],
    ["POST", "/api/groups", { json: { topic: decoded(seg), group: "g" } }],
    ["POST", "/api/groups", { json: { topic: "ok", group: decoded(seg) } }],
    ["GET", `/api/groups?topic=${q}`],
    ["POST", "/api/queues/publish", { json: { queue: decoded(seg), payload: "x" } }],
    ["POST", "/api/queues/consume", { json: { queue: decoded(seg) } }],
    ["GET", `/api/queues/peek?queue=${q}`],
    ["POST", `/api/queues/redrive?queue=${q}`],
    ["DELETE", `/api/queues/purge?queue=${q}`],
    ["DELETE", `/api/queues/delete?queue=${q}`],
    ["GET", `/api/queues/webhooks?queue=${q}`],
  ];
}

/** Every file and directory under `dir`, relative. */
async function listTree(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    out.push(prefix + e.name);
    if (e.isDirectory) out.push(...await listTree(`${dir}/${e.name}`, `${prefix}${e.name}/`));
  }
  return out;
}

/** POST /webhook/{topic} arrives with the webhooks issue. */
const WEBHOOKS_PENDING = false;

Deno.test("bad topic and group names are 400 invalid_name everywhere, nothing on disk", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "ok", "x"); // a real topic, so only the name can be wrong
    const bad = new Failures();
    for (const seg of BAD_NAMES) {
      for (const [method, path, init] of nameCalls(seg)) {
        const res = await ctx.call(method, path, init);
        const label = `${method} ${path} ${JSON.stringify(init?.json ?? "")}`;
        bad.check(label, () => assertProblem(res, 400, "invalid_name"));
      }
    }
    bad.assertNone();
    const parent = `${ctx.dataDir}/..`;
    for (const p of [TOKEN, `${TOKEN}.wal`, `../${TOKEN}`, `../${TOKEN}.wal`]) {
      assertEquals(
        await exists(`${parent}/${p}`),
        false,
        `${p} created outside the data dir`,
      );
    }
    const tree = await listTree(ctx.dataDir);
    for (const entry of tree) {
      assert(!entry.includes("/"), `a subdirectory appeared in the data dir: ${entry}`);
      assert(!/hidden|caf|escape|a b|\.\.|^a\*|a:b/.test(entry), `bad name on disk: ${entry}`);
    }
  });
});

Deno.test({
  name: "POST /webhook/{topic} with a bad topic name is 400 invalid_name",
  // Webhook registration is its own issue; these tests are ready for it.
  ignore: WEBHOOKS_PENDING,
}, async () => {
  await withBroker({}, async (ctx) => {
    const bad = new Failures();
    for (const seg of BAD_NAMES) {
      const res = await ctx.call("POST", `/webhook/${seg}`, {
        json: { url: "http://127.0.0.1:9/" },
      });
      bad.check(`POST /webhook/${seg}`, () => assertProblem(res, 400, "invalid_name"));
    }
    bad.assertNone();
  });
});

Deno.test("names of 200 characters and of every allowed character are accepted", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "a".repeat(200), "x");
    await publish(ctx, "Az09._-x", "y");
    await publish(ctx, "_under", "z");
    await publish(ctx, "-dash", "w");
    const g = await ctx.call("POST", "/api/groups", {
      json: { topic: "Az09._-x", group: "G.r_o-up9" },
    });
    assertEquals(g.status, 201, g.text);
    assertEquals((await consume(ctx, "a".repeat(200))).payload_text, "x");
  });
});

Deno.test("a missing topic is 400", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(await ctx.call("POST", "/publish/", { body: "x" }), 400);
    assertProblem(await ctx.call("GET", "/consume/"), 400);
  });
});

const BAD_DURATIONS = ["10", "5x", "-1s", "1.5s", "1d", "5 s", "s", "1e3ms", "+5s", "5S"];

Deno.test("bad durations are 400 invalid_duration everywhere", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "dur", "x");
    const m = await consume(ctx, "dur");
    const bad = new Failures();
    for (const d of BAD_DURATIONS) {
      const v = encodeURIComponent(d);
      const calls: [string, string, CallInit?][] = [
        ["POST", `/publish/dur?ttl=${v}`, { body: "x" }],
        ["POST", `/publish/dur?delay=${v}`, { body: "x" }],
        ["GET", `/consume/dur?timeout=${v}`],
        ["GET", `/consume/dur?visibility=${v}`],
        ["POST", `/touch/dur/${m.id}?by=${v}`],
        ["POST", `/requeue?delay=${v}`, { json: m }],
        ["POST", "/api/topics", { json: { name: "newtopic", retain: d } }],
        ["POST", "/api/topics", { json: { name: "newtopic", visibility: d } }],
        ["POST", "/api/queues/publish", { json: { queue: "dur", payload: "x", ttl: d } }],
        ["POST", "/api/queues/publish", { json: { queue: "dur", payload: "x", delay: d } }],
      ];
      for (const [method, path, init] of calls) {
        const res = await ctx.call(method, path, init);
        const label = `${method} ${path} ${JSON.stringify(init?.json ?? "")}`;
        bad.check(label, () => assertProblem(res, 400, "invalid_duration"));
      }
    }
    bad.assertNone();
    // Nothing was published or requeued by the refused calls; the message is still in flight.
    const left = await ctx.call("GET", "/consume/dur?limit=10");
    assertProblem(left, 404, "queue_empty");
    assertEquals((await ctx.call("POST", `/ack/dur/${m.id}`)).status, 204);
    const created = await ctx.call("POST", "/api/topics", { json: { name: "newtopic" } });
    assertEquals(created.status, 201, "the refused calls did not create the topic");
  });
});

Deno.test("durations in ms, s, m and h are accepted", async () => {
  await withBroker({}, async (ctx) => {
    for (const d of ["250ms", "30s", "5m", "1h"]) await publish(ctx, "okd", "x", `ttl=${d}`);
    await publish(ctx, "okd", "y", "delay=0s");
    assertEquals(
      (await consume(ctx, "okd", "limit=10&timeout=0s&visibility=1m")).length,
      5,
    );
  });
});

Deno.test("a bad limit is 400", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "lim", "x");
    for (const l of ["0", "1001", "abc", "-1", "1.5", "1e2", "10x"]) {
      assertProblem(await ctx.call("GET", `/consume/lim?limit=${l}`), 400);
    }
    const ok = await consume(ctx, "lim", "limit=1000");
    assertEquals(ok.length, 1);
  });
});

Deno.test("a long-poll timeout over 30s is 400", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "to", "x");
    for (const t of ["31s", "30001ms", "1m", "1h"]) {
      assertProblem(await ctx.call("GET", `/consume/to?timeout=${t}`), 400);
    }
    // 30s is allowed; a message is waiting, so it answers at once.
    assertEquals((await consume(ctx, "to", "timeout=30s")).payload_text, "x");
  });
});

Deno.test("an unknown priority is 400", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(await ctx.call("POST", "/publish/p?priority=urgent", { body: "x" }), 400);
    assertProblem(
      await ctx.call("POST", "/api/queues/publish", {
        json: { queue: "p", payload: "x", priority: "urgent" },
      }),
      400,
    );
    assertProblem(await ctx.call("GET", "/consume/p"), 404);
  });
});

Deno.test("malformed or mistyped JSON bodies are 400", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "j", "x");
    const raw = ["{", "not json", "[]", "null", "42", '"str"', "{'a':1}", ""];
    const paths = [
      "/api/topics",
      "/api/groups",
      "/requeue",
      "/ack/j",
      "/api/queues/publish",
      "/api/queues/consume",
    ];
    const bad = new Failures();
    for (const path of paths) {
      for (const body of raw) {
        const res = await ctx.call("POST", path, {
          body,
          headers: { "content-type": "application/json" },
        });
        bad.check(`POST ${path} ${JSON.stringify(body)}`, () => assertProblem(res, 400));
      }
    }
    const typed: [string, unknown][] = [
      ["/api/topics", { name: 5 }],
      ["/api/topics", { name: "t", policy: 5 }],
      ["/api/topics", { name: "t", retain: 10 }],
      ["/api/groups", { topic: "j" }],
      ["/api/groups", { topic: "j", group: 7 }],
      ["/requeue", {}],
      ["/requeue", { id: 5, topic: "j" }],
      ["/ack/j", {}],
      ["/ack/j", { ids: "abc" }],
      ["/ack/j", { ids: [1, 2] }],
      ["/api/queues/publish", { queue: "j", payload: 5 }],
      ["/api/queues/publish", { queue: "j" }],
      ["/api/queues/consume", {}],
    ];
    for (const [path, json] of typed) {
      const res = await ctx.call("POST", path, { json });
      bad.check(`POST ${path} ${JSON.stringify(json)}`, () => assertProblem(res, 400));
    }
    bad.assertNone();
    // Nothing happened to the queue.
    const all = await consume(ctx, "j", "limit=10");
    assertEquals(all.map((m: { payload_text: string }) => m.payload_text), ["x"]);
  });
});

Deno.test({
  name: "POST /webhook/{topic} with a malformed or mistyped body is 400",
  // Webhook registration is its own issue; these tests are ready for it.
  ignore: WEBHOOKS_PENDING,
}, async () => {
  // Loopback opened, so the 400 below is the secret's, not the target's.
  await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
    await publish(ctx, "wh", "x");
    const bad = new Failures();
    for (const body of ["{", "not json", "[]", "null", "", "{}", '{"url":5}']) {
      const res = await ctx.call("POST", "/webhook/wh", {
        body,
        headers: { "content-type": "application/json" },
      });
      bad.check(`POST /webhook/wh ${JSON.stringify(body)}`, () => assertProblem(res, 400));
    }
    const secret = await ctx.call("POST", "/webhook/wh", {
      json: { url: "http://127.0.0.1:9/", secret: 5 },
    });
    bad.check("POST /webhook/wh secret:5", () => assertProblem(secret, 400));
    bad.assertNone();
  });
});

Deno.test("a wrong method is 405 method_not_allowed with Allow", async () => {
  await withBroker({}, async (ctx) => {
    const cases: [string, string, string[]][] = [
      ["GET", "/publish/t", ["POST"]],
      ["PUT", "/publish/t", ["POST"]],
      ["DELETE", "/consume/t", ["GET"]],
      ["POST", "/consume/t", ["GET"]],
      ["GET", "/ack/t/01890000-0000-7000-8000-000000000000", ["POST"]],
      ["GET", "/requeue", ["POST"]],
      ["PUT", "/api/topics", ["POST"]],
      ["DELETE", "/api/groups", ["GET", "POST"]],
      ["GET", "/api/drain", ["POST"]],
      ["POST", "/healthz", ["GET"]],
      ["GET", "/api/queues/purge?queue=t", ["DELETE"]],
      ["PATCH", "/api/queues/delete?queue=t", ["DELETE"]],
      ["GET", "/api/queues/redrive?queue=t", ["POST"]],
    ];
    const bad = new Failures();
    for (const [method, path, allowed] of cases) {
      const res = await ctx.call(method, path, method === "GET" ? {} : { body: "x" });
      bad.check(`${method} ${path}`, () => {
        assertProblem(res, 405, "method_not_allowed");
        const allow = (res.headers.get("allow") ?? "").split(",").map((s) => s.trim());
        for (const a of allowed) assert(allow.includes(a), `Allow is "${allow}"`);
      });
    }
    bad.assertNone();
  });
});

Deno.test("an unknown route is 404", async () => {
  await withBroker({}, async (ctx) => {
    const bad = new Failures();
    for (const path of ["/nope", "/api/nope", "/publish/t/extra", "/api/queues/nope", "/%zz"]) {
      const res = await ctx.call("GET", path);
      bad.check(`GET ${path}`, () => assertProblem(res, 404));
    }
    bad.assertNone();
  });
});

Deno.test("oversized bodies are 413 payload_too_large", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(
      await ctx.call("POST", "/publish/big", { body: new Uint8Array(MB2 + 1) }),
      413,
      "payload_too_large",
    );
    assertProblem(
      await ctx.call("POST", "/api/queues/publish", {
        json: { queue: "big", payload: "a".repeat(MB2 + 1) },
      }),
      413,
      "payload_too_large",
    );
    assertProblem(await ctx.call("GET", "/consume/big"), 404);
  });
});

Deno.test("undecodable percent-escapes in a name are 400, never 500", async () => {
  await withBroker({}, async (ctx) => {
    const bad = new Failures();
    for (const seg of ["%zz", "abc%", "%E2%9C", "%C0%AF"]) {
      const pub = await ctx.call("POST", `/publish/${seg}`, { body: "x" });
      bad.check(`POST /publish/${seg}`, () => assertProblem(pub, 400));
      const con = await ctx.call("GET", `/consume/${seg}`);
      bad.check(`GET /consume/${seg}`, () => assertProblem(con, 400));
    }
    bad.assertNone();
  });
});

/** One bad request of the hammer, chosen by `i`; any 4xx is fine, a 5xx or hang is not. */
function badRequest(i: number): [string, string, CallInit?] {
  const pick = <T>(xs: T[]): T => xs[i % xs.length]!;
  switch (i % 12) {
    case 0:
      return ["POST", `/publish/${pick(BAD_NAMES)}`, { body: "x" }];
    case 1:
      return ["POST", `/publish/h?ttl=${encodeURIComponent(pick(BAD_DURATIONS))}`, { body: "x" }];
    case 2:
      return ["GET", `/consume/h?limit=${pick(["0", "abc", "99999", "-5"])}`];
    case 3:
      return ["GET", `/consume/h?timeout=${pick(["31s", "1h", "x", "1.5s"])}`];
    case 4:
      return ["POST", pick(["/api/topics", "/requeue", "/api/groups"]), {
        body: pick(["{", "[1,", "nul", '{"name":'] as string[]),
        headers: { "content-type": "application/json" },
      }];
    case 5:
      return [pick(["PUT", "DELETE", "PATCH"]), "/publish/h", { body: "x" }];
    case 6:
      return ["GET", `/nothing/${i}`];
    case 7:
      return ["POST", "/publish/h"]; // empty body
    case 8:
      return ["POST", `/ack/h/${crypto.randomUUID()}`];
    case 9:
      return ["POST", `/touch/h/${crypto.randomUUID()}?by=${pick(["x", "30s"])}`];
    case 10:
      return ["GET", `/consume/${pick(["%zz", "abc%", "a%20b"])}?group=${pick(["..", "%2e"])}`];
    default:
      // A few oversized bodies; most of the hammer stays small.
      return i % 60 === 11
        ? ["POST", "/publish/h", { body: new Uint8Array(MB2 + 1) }]
        : ["POST", "/requeue", { json: { id: crypto.randomUUID(), topic: "h" } }];
  }
}

/** Runs `n` bad requests, `width` at a time, and checks each got a 4xx problem. */
async function hammer(ctx: TestBroker, n: number, width: number): Promise<void> {
  let next = 0;
  const failures: string[] = [];
  async function worker() {
    while (next < n) {
      const i = next++;
      const [method, path, init] = badRequest(i);
      const res = await ctx.call(method, path, init);
      const problem = /^application\/problem\+json/.test(res.headers.get("content-type") ?? "");
      if (res.status < 400 || res.status >= 500 || !problem) {
        failures.push(`${method} ${path} -> ${res.status} ${res.text.slice(0, 200)}`);
      }
    }
  }
  await Promise.all(Array.from({ length: width }, worker));
  assertEquals(failures, []);
}

Deno.test("after a few hundred mixed bad requests the broker still works", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "h", "before");
    await hammer(ctx, 360, 16);
    const health = await ctx.call("GET", "/healthz");
    assertEquals(health.status, 200, health.text);
    assertEquals(health.body.status, "ok");
    await publish(ctx, "h", "after");
    const all = await consume(ctx, "h", "limit=10");
    assertEquals(all.map((m: { payload_text: string }) => m.payload_text), [
      "before",
      "after",
    ]);
    for (const m of all) {
      assertEquals((await ctx.call("POST", `/ack/h/${m.id}`)).status, 204);
    }
  });
});
