/**
 * API keys through the HTTP server: every route of the table refuses a request without a valid
 * key (so a route added without auth fails here), scopes, the ways to send a key, the keys file
 * and its SIGHUP reload.
 */

import {
  assert,
  assertEquals,
  assertMatch,
  assertNotEquals,
  Failures,
} from "../_support/assert.ts";
import { KeyRing, type KeyScope, parseKeyList } from "../../lib/auth.ts";
import { hashedKey } from "../../protocol/key_hash.ts";
import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { Logger } from "../../lib/log.ts";
import { createHandler, ROUTES } from "../../routes/app.ts";
import { authHook } from "../../routes/auth.ts";
import { json } from "../../routes/http.ts";
import type { Route } from "../../routes/router.ts";
import { parseLogLine, runMain, spawnBroker } from "../_support/child.ts";
import { assertProblem, call } from "../_support/http.ts";
import { startBroker } from "../_support/server.ts";

const FULL = "full-key-7c1e0b";
const KEYS: Record<KeyScope, string> = {
  publish: "pub-key-1a2b",
  consume: "con-key-3c4d",
  admin: "adm-key-5e6f",
  metrics: "met-key-7a8b",
};
const API_KEYS = `${FULL},${KEYS.publish}:publish,${KEYS.consume}:consume,${KEYS.admin}:admin,` +
  `${KEYS.metrics}:metrics`;

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

/** Values for every path parameter a route may have. */
const PARAMS: Record<string, string> = { topic: "t1", id: "0190b8a2-0000-7000-8000-000000000001" };

/**
 * A JSON body that satisfies every JSON route's required fields (topics, groups, requeue, batch
 * ack, dashboard publish/consume, webhooks), so a route added later gets a plausible request too.
 */
const BODY = {
  name: "t-created",
  topic: "t1",
  group: "g-created",
  queue: "t1",
  payload: "hello",
  id: PARAMS.id,
  ids: [PARAMS.id],
  url: "http://127.0.0.1:9/hook",
};

/** The path of a route with its parameters filled in, and the `queue`/`topic` query. */
function pathOf(route: Route): string {
  const path = route.pattern.replace(/:(\w+)/g, (_, name: string) => PARAMS[name] ?? "x1");
  return `${path}?queue=t1&topic=t1`;
}

/** Sends a plausible request for a route; reads only the status (a stream's body is dropped). */
async function callRoute(
  base: string,
  route: Route,
  headers: Record<string, string> = {},
  path = pathOf(route),
): Promise<{ status: number; code?: string; text: string }> {
  const init: RequestInit = { method: route.method, headers: { ...headers } };
  if (route.method === "POST" && route.pattern.startsWith("/publish/")) {
    init.body = "hello";
  } else if (route.method === "POST" || route.method === "PUT") {
    init.body = JSON.stringify(BODY);
    (init.headers as Record<string, string>)["content-type"] = "application/json";
  }
  const res = await fetch(base + path, init);
  const streaming = (res.headers.get("content-type") ?? "").startsWith("text/event-stream");
  if (streaming) {
    await res.body?.cancel();
    return { status: res.status, text: "" };
  }
  const text = await res.text();
  let code: string | undefined;
  try {
    code = JSON.parse(text).code;
  } catch { /* not JSON */ }
  return { status: res.status, code, text };
}

/** Drain ends the broker's service, so it goes last. */
function routesDrainLast(): Route[] {
  return [...ROUTES].sort((a, b) =>
    Number(a.pattern === "/api/drain") - Number(b.pattern === "/api/drain")
  );
}

Deno.test("auth: every non-public route answers 401 without a key or with a wrong one, and not 401/403 with a full key", async () => {
  const b = await startBroker({ apiKeys: API_KEYS });
  try {
    const routes = routesDrainLast();
    assert(routes.some((r) => r.scope !== "public"));
    const f = new Failures();
    for (const r of routes) {
      const label = `${r.method} ${r.pattern}`;
      if (r.scope === "public") {
        const res = await callRoute(b.url, r);
        f.check(`${label} (public, no key)`, () => assert(![401, 403].includes(res.status)));
        continue;
      }
      for (const [how, headers] of [["no key", {}], ["wrong key", bearer("wrong-key")]] as const) {
        const res = await callRoute(b.url, r, headers);
        f.check(`${label} ${how}`, () => {
          assertEquals(res.status, 401, res.text);
          assertEquals(res.code, "unauthorized", res.text);
        });
      }
    }
    for (const r of routes) {
      const res = await callRoute(b.url, r, bearer(FULL));
      f.check(
        `${r.method} ${r.pattern} full key`,
        () => assert(![401, 403].includes(res.status), `${res.status} ${res.text}`),
      );
    }
    f.assertNone();
  } finally {
    await b.close();
  }
});

Deno.test("auth: a key with one scope passes that scope's routes and gets 403 forbidden elsewhere", async () => {
  const b = await startBroker({ apiKeys: API_KEYS });
  try {
    const f = new Failures();
    for (const r of routesDrainLast().filter((r) => r.scope !== "public")) {
      for (const [scope, key] of Object.entries(KEYS)) {
        if (scope === r.scope && r.pattern === "/api/drain") continue; // the full-key test drains
        const res = await callRoute(b.url, r, { "x-api-key": key });
        // `admin` includes `metrics` (docs/operating.md).
        const passes = scope === r.scope || (scope === "admin" && r.scope === "metrics");
        f.check(`${r.method} ${r.pattern} with a ${scope} key`, () => {
          if (passes) assert(![401, 403].includes(res.status), res.text);
          else {
            assertEquals(res.status, 403, res.text);
            assertEquals(res.code, "forbidden", res.text);
          }
        });
      }
    }
    f.assertNone();
  } finally {
    await b.close();
  }
});

Deno.test("auth: a publish-only key publishes but cannot consume, list queues or read metrics", async () => {
  const b = await startBroker({ apiKeys: API_KEYS });
  try {
    const h = { headers: bearer(KEYS.publish) };
    assertEquals(
      (await call(b.url, "POST", "/publish/orders", { ...h, body: "x" })).status,
      201,
    );
    assertProblem(await call(b.url, "GET", "/consume/orders", h), 403, "forbidden");
    assertProblem(await call(b.url, "GET", "/api/queues", h), 403, "forbidden");
    assertProblem(await call(b.url, "GET", "/metrics", h), 403, "forbidden");
    const c = { headers: bearer(KEYS.consume) };
    assertEquals(
      (await call(b.url, "GET", "/consume/orders?auto_ack=true", c)).status,
      200,
    );
  } finally {
    await b.close();
  }
});

Deno.test("auth: Bearer (any case) and X-API-Key both work; 401 carries WWW-Authenticate and a problem body", async () => {
  const b = await startBroker({ apiKeys: FULL });
  try {
    for (
      const headers of [bearer(FULL), { authorization: `bearer ${FULL}` }, { "x-api-key": FULL }]
    ) {
      const res = await call(b.url, "GET", "/api/queues", { headers });
      assertEquals(res.status, 200, `${JSON.stringify(headers)}: ${res.text}`);
    }
    const cases: Record<string, string>[] = [
      {},
      bearer("nope"),
      { "x-api-key": "nope" },
      { authorization: `Basic ${btoa(`u:${FULL}`)}` },
      { authorization: `Token ${FULL}` },
      bearer(FULL + "x"),
      bearer(FULL.slice(0, -1)),
      bearer(""),
    ];
    for (const headers of cases) {
      const res = await call(b.url, "GET", "/api/queues", { headers });
      assertProblem(res, 401, "unauthorized");
      assertEquals(res.headers.get("www-authenticate"), 'Bearer realm="ferry"');
      assert(!res.text.includes(FULL), "the answer never echoes a key");
    }
    const health = await call(b.url, "GET", "/healthz");
    assertEquals(health.status, 200, "/healthz needs no key");
    assertEquals((await call(b.url, "GET", "/no/such/route")).status, 404);
  } finally {
    await b.close();
  }
});

Deno.test("auth: ?api_key= is accepted on /stream/* and /ws only", async () => {
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:" }), { tick: false });
  try {
    const ok = () => json({ ok: true });
    // Stand-ins first, ahead of the real ones: this checks where the key is read, not the route.
    const routes: Route[] = [
      { method: "GET", pattern: "/stream/:topic", scope: "consume", handler: ok },
      { method: "GET", pattern: "/ws", scope: "consume", handler: ok },
      ...ROUTES,
    ];
    const handle = createHandler(broker, {
      routes,
      before: [authHook(new KeyRing(parseKeyList(FULL)))],
    });
    const status = async (path: string, init: RequestInit = {}) => {
      const res = await handle(new Request(`http://ferry${path}`, init));
      await res.body?.cancel();
      return res.status;
    };
    assertEquals(await status(`/stream/t1?api_key=${FULL}`), 200);
    assertEquals(await status(`/ws?api_key=${FULL}`), 200);
    assertEquals(await status(`/stream/t1?api_key=wrong`), 401);
    assertEquals(await status(`/stream/t1`), 401);
    assertEquals(await status(`/api/queues?api_key=${FULL}`), 401);
    assertEquals(await status(`/consume/t1?api_key=${FULL}`), 401);
    assertEquals(await status(`/cluster/replicate?node=n&term=1&api_key=${FULL}`), 401);
    assertEquals(
      await status(`/publish/t1?api_key=${FULL}`, { method: "POST", body: "x" }),
      401,
    );
  } finally {
    await broker.close();
  }
});

Deno.test("auth: without BROKER_API_KEYS every route is open", async () => {
  const b = await startBroker({});
  try {
    assertEquals((await call(b.url, "GET", "/api/queues")).status, 200);
    assertEquals((await call(b.url, "POST", "/publish/t", { body: "x" })).status, 201);
  } finally {
    await b.close();
  }
});

Deno.test("auth: the access log carries neither keys nor the query string", async () => {
  const lines: string[] = [];
  const log = new Logger("info", (l) => lines.push(l));
  const b = await startBroker({ apiKeys: FULL, accessLog: true }, { log });
  try {
    // Refused (only /stream and /ws take ?api_key=), and still not logged.
    await call(b.url, "POST", `/publish/t?api_key=${FULL}`, { body: "x", headers: bearer(FULL) });
    await call(b.url, "GET", "/api/queues", { headers: { "x-api-key": FULL } });
    await call(b.url, "GET", "/api/queues", { headers: bearer("wrong-and-secret") });
    const access = lines.map((l) => JSON.parse(l)).filter((r) => r.msg === "request");
    assertEquals(access.length, 3, lines.join(""));
    assertEquals(
      access.map((r) => [r.method, r.route, r.status]),
      [["POST", "/publish/:topic", 400], ["GET", "/api/queues", 200], [
        "GET",
        "/api/queues",
        401,
      ]],
    );
    for (const r of access) {
      assertEquals(typeof r.request_id, "string");
      assertEquals(typeof r.duration_ms, "number");
    }
    const all = lines.join("");
    assert(!all.includes(FULL) && !all.includes("wrong-and-secret") && !all.includes("api_key"));
  } finally {
    await b.close();
  }
});

Deno.test("auth: the keys file is read at start and re-read on SIGHUP; a bad file keeps the old keys", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-auth-" });
  const file = await Deno.makeTempFile({ prefix: "ferry-keys-" });
  await Deno.writeTextFile(file, "# publishers\nfile-key-one:publish\n\n");
  const child = await spawnBroker({
    dataDir,
    env: { BROKER_API_KEYS_FILE: file, BROKER_API_KEYS: "env-key-two:admin" },
  });
  const status = async (key: string, method = "POST", path = "/publish/t") =>
    (await call(child.url, method, path, {
      body: method === "POST" ? "x" : undefined,
      headers: bearer(key),
    })).status;
  try {
    assertEquals(await status("file-key-one"), 201);
    assertEquals(await status("file-key-three"), 401);
    assertEquals(await status("env-key-two", "GET", "/api/queues"), 200);

    await Deno.writeTextFile(file, "file-key-three:publish+consume\n");
    let from = child.logs.length;
    child.kill("SIGHUP");
    const rec = parseLogLine(await child.logged("api keys reloaded", from))!;
    assertEquals(rec.keys, 2, "one key from the file, one from BROKER_API_KEYS");
    assertEquals(await status("file-key-one"), 401);
    assertEquals(await status("file-key-three"), 201);
    assertEquals(await status("env-key-two", "GET", "/api/queues"), 200);

    await Deno.writeTextFile(file, "file-key-four:sudo\n");
    from = child.logs.length;
    child.kill("SIGHUP");
    await child.logged("api keys not reloaded; the previous keys stay in use", from);
    assertEquals(await status("file-key-three"), 201);
    assertEquals(await status("file-key-four"), 401);

    const logs = child.logs.join("\n");
    for (const k of ["file-key-one", "env-key-two", "file-key-three", "file-key-four"]) {
      assert(!logs.includes(k), `the log shows the key ${k}`);
    }
  } finally {
    child.kill("SIGTERM");
    await child.exited;
    await Deno.remove(dataDir, { recursive: true });
    await Deno.remove(file);
  }
});

Deno.test("auth: a bad key setting stops start-up with one line naming it, never the key", async () => {
  for (
    const [env, name] of [
      [{ BROKER_API_KEYS: "secret-one,secret-two:publsh" }, "BROKER_API_KEYS"],
      [{ BROKER_API_KEYS_FILE: "/nonexistent/ferry-keys" }, "BROKER_API_KEYS_FILE"],
    ] as const
  ) {
    const out = await runMain({ dataDir: ":memory:", env });
    const err = out.stderr.trim();
    assertNotEquals(out.code, 0, err);
    assertEquals(err.split("\n").length, 1, err);
    assert(err.includes(name), err);
    assert(!err.includes("secret-"), err);
    assert(!/Requires \w+ access/.test(err), `a permission error, not the setting's: ${err}`);
  }
});

Deno.test("auth: a hashed key with a rate is held to it (429, metric by name); admin actions are audited", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-auth-" });
  const file = await Deno.makeTempFile({ prefix: "ferry-keys-" });
  const hashed = await hashedKey("pub-secret");
  const keysFile = (rate: string) =>
    `${hashed}:publish name=billing rate=${rate}\nadmin-secret:admin name=ops\n`;
  await Deno.writeTextFile(file, keysFile("5/s"));
  assert(!(await Deno.readTextFile(file)).includes("pub-secret"), "the file holds no usable key");
  const child = await spawnBroker({ dataDir, env: { BROKER_API_KEYS_FILE: file } });
  const pub = (body = "x") =>
    call(child.url, "POST", "/publish/t", { body, headers: bearer("pub-secret") });
  const admin = (method: string, path: string, json?: unknown) =>
    call(child.url, method, path, { json, headers: bearer("admin-secret") });
  const audits = (from: number) =>
    child.logs.slice(from).map(parseLogLine).filter((l) => l?.msg === "audit");
  try {
    // A batch past a second's worth goes through once, and leaves the key in debt.
    const batch = await call(child.url, "POST", "/publish/t/batch", {
      json: Array.from({ length: 20 }, (_, i) => ({ payload: `m${i}` })),
      headers: bearer("pub-secret"),
    });
    assertEquals(batch.status, 201, batch.text);
    const limited = await pub();
    assertProblem(limited, 429, "rate_limited");
    assert(Number(limited.headers.get("retry-after")) >= 1);
    assert(String(limited.body && (limited.body as { detail: string }).detail).includes("billing"));
    const metrics = (await admin("GET", "/metrics")).text;
    assert(metrics.includes('ferry_rate_limited_total{key="billing"} 1'), metrics);

    let from = child.logs.length;
    const created = await admin("POST", "/api/topics", { name: "audited" });
    assertEquals(created.status, 201);
    assertEquals((await admin("DELETE", "/api/topics/audited")).status, 200);
    const denied = await call(child.url, "DELETE", "/api/queues/purge?queue=t", {
      headers: bearer("pub-secret"),
    });
    assertEquals(denied.status, 403);
    await child.logged("audit", from); // written as each answer went; the last may trail
    for (let i = 0; i < 100 && audits(from).length < 3; i++) {
      await new Promise((r) => setTimeout(r, 10)); // stderr is read as it comes: no event to wait on
    }
    assertEquals(
      audits(from).map((a) => [a!.action, a!.key, a!.subject ?? a!.path, a!.status]),
      [
        ["topic.create", "ops", "audited", 201],
        ["topic.delete", "ops", "/api/topics/audited", 200],
        ["queue.purge", "billing", "t", 403],
      ],
    );
    assertEquals(audits(from)[0]!.request_id, created.headers.get("x-request-id"));

    await Deno.writeTextFile(file, keysFile("1000/s"));
    from = child.logs.length;
    child.kill("SIGHUP");
    await child.logged("api keys reloaded", from);
    await child.logged("audit", from);
    assertEquals(audits(from).map((a) => [a!.action, a!.status]), [["keys.reload", "ok"]]);
    assertEquals((await pub()).status, 201, "the new limit holds at once");
    const logs = child.logs.join("\n");
    assert(!logs.includes("pub-secret") && !logs.includes("admin-secret"), "no key in the log");
  } finally {
    child.kill("SIGTERM");
    await child.exited;
    await Deno.remove(dataDir, { recursive: true });
    await Deno.remove(file);
  }
});

Deno.test("auth: two keys of one name are refused at start-up, and a reload bringing them keeps the old keys", async () => {
  const file = await Deno.makeTempFile({ prefix: "ferry-keys-" });
  const dupes = "dup-b-secret:publish name=same rate=1/s\ndup-a-secret:publish name=same\n";
  try {
    await Deno.writeTextFile(file, dupes);
    const out = await runMain({ dataDir: ":memory:", env: { BROKER_API_KEYS_FILE: file } });
    const err = out.stderr.trim();
    assertEquals(out.code, 2, err);
    assertEquals(err.split("\n").length, 1, err);
    assertMatch(err, /BROKER_API_KEYS_FILE line 2: the name "same" is taken by another key/);
    assert(err.includes("BROKER_API_KEYS_FILE line 1") && err.includes("name="), err);
    assert(!err.includes("secret"), err);

    // Across the two settings too, and against a key's default name.
    const [other] = parseKeyList("env-secret");
    await Deno.writeTextFile(file, `file-secret:publish name=${other!.name}\n`);
    const both = await runMain({
      dataDir: ":memory:",
      env: { BROKER_API_KEYS_FILE: file, BROKER_API_KEYS: "env-secret:admin" },
    });
    assertEquals(both.code, 2, both.stderr);
    assertMatch(both.stderr, /BROKER_API_KEYS_FILE line 1: the name "key-[0-9a-f]{8}" is taken/);
    assert(both.stderr.includes("BROKER_API_KEYS entry 1"), both.stderr);

    const dataDir = await Deno.makeTempDir({ prefix: "ferry-auth-" });
    await Deno.writeTextFile(file, "dup-b-secret:publish name=same\n");
    const child = await spawnBroker({ dataDir, env: { BROKER_API_KEYS_FILE: file } });
    try {
      await Deno.writeTextFile(file, dupes);
      const from = child.logs.length;
      child.kill("SIGHUP");
      const rec = parseLogLine(
        await child.logged("api keys not reloaded; the previous keys stay in use", from),
      )!;
      assertMatch(String(rec.error), /line 2: the name "same" is taken/);
      const pub = (key: string) =>
        call(child.url, "POST", "/publish/t", { body: "x", headers: bearer(key) });
      assertEquals((await pub("dup-b-secret")).status, 201);
      assertEquals((await pub("dup-a-secret")).status, 401);
      assert(!child.logs.join("\n").includes("secret"), "no key in the log");
    } finally {
      child.kill("SIGTERM");
      await child.exited;
      await Deno.remove(dataDir, { recursive: true });
    }
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("auth: each key has buckets of its own: an unlimited key is never held by a limited one", async () => {
  const b = await startBroker({
    apiKeys: "slow-key:publish name=slow rate=1/s,free-key:publish name=free",
  });
  try {
    const burst = (key: string) =>
      Promise.all(
        Array.from({ length: 20 }, () =>
          call(b.url, "POST", "/publish/t", { body: "x", headers: bearer(key) })
            .then((r) =>
              r.status
            )),
      );
    const slow = await burst("slow-key");
    // A bucket of 1/s admits while not empty: one, maybe two in the first milliseconds.
    assert(slow.filter((s) => s === 429).length >= 15, JSON.stringify(slow));
    const free = await burst("free-key");
    assertEquals(free.filter((s) => s === 201).length, 20, JSON.stringify(free));
  } finally {
    await b.close();
  }
});

Deno.test("auth: an entry made of scope names (k:publish,consume+admin) is refused at start-up with what was meant", async () => {
  const cases: [string, string][] = [
    ["k9f3e1c2a7b4xx:publish,consume+admin", "key:publish+consume+admin"],
    ["k9f3e1c2a7b4xx:admin,publish+consume", "key:admin+publish+consume"],
    ["k9f3e1c2a7b4xx:publish,metrics", "key:publish+metrics"],
    ["k9f3e1c2a7b4xx:publish,Consume+Admin", "key:publish+consume+admin"],
  ];
  for (const [keys, meant] of cases) {
    const out = await runMain({ dataDir: ":memory:", env: { BROKER_API_KEYS: keys } });
    const err = out.stderr.trim();
    assertEquals(out.code, 2, err);
    assertEquals(err.split("\n").length, 1, err);
    assert(err.includes("BROKER_API_KEYS entry 2") && err.includes("looks like scopes"), err);
    assert(err.includes(meant), err);
    assert(!err.includes("k9f3e1c2a7b4xx"), err);
  }
});

Deno.test("auth: /cluster/replicate reads a key from a header only, never from ?api_key=", async () => {
  const b = await startBroker({ apiKeys: `${KEYS.admin}:admin,${KEYS.consume}:consume` });
  try {
    const path = "/cluster/replicate?node=n1&term=1";
    for (const key of [KEYS.admin, KEYS.consume]) {
      const res = await call(b.url, "GET", `${path}&api_key=${key}`);
      assertProblem(res, 401, "unauthorized");
    }
    // With the key in a header, auth passes and the route answers for itself (standalone: 404).
    const res = await call(b.url, "GET", path, { headers: bearer(KEYS.admin) });
    assertProblem(res, 404, "not_found");
  } finally {
    await b.close();
  }
});

Deno.test("auth: the server refuses --api-keys (a key in ps) and points to BROKER_API_KEYS or a keys file", async () => {
  for (
    const args of [["--api-keys", "flagkey-SECRET-99887766:admin"], ["--api-keys=flagkey-SECRET"]]
  ) {
    const out = await runMain({ dataDir: ":memory:", args });
    const err = out.stderr.trim();
    assertEquals(out.code, 2, err);
    assertEquals(err.split("\n").length, 1, err);
    assert(err.includes("BROKER_API_KEYS") && err.includes("--api-keys-file"), err);
    assert(err.includes("replace it"), `the key may be in the log already: ${err}`);
    assert(!err.includes("SECRET"), err);
  }
});

Deno.test("auth: webhook.add and webhook.delete audit lines name the URL, never its credentials", async () => {
  const lines: string[] = [];
  const log = new Logger("error", (l) => lines.push(l));
  // The webhook's host resolves to a documentation address: registered, never delivered to.
  const resolve = (host: string) =>
    Promise.resolve(host === "hooks.example.com" ? ["192.0.2.7"] : []);
  const b = await startBroker({ apiKeys: `${KEYS.admin}:admin name=ops` }, { log, resolve });
  try {
    const audits = () =>
      lines.map((l) => JSON.parse(l)).filter((r) =>
        r.msg === "audit" && r.action.startsWith("webhook")
      );
    const h = { headers: bearer(KEYS.admin) };
    const added = await call(b.url, "POST", "/webhook/hooked", {
      ...h,
      json: {
        url: "https://user:pa55word@hooks.example.com/ferry/in?token=t0ken#x",
        secret: "s3cret",
      },
    });
    const refused = await call(b.url, "POST", "/webhook/hooked", {
      ...h,
      json: { url: "ftp://files.example.com/drop" },
    });
    assertEquals(refused.status, 400, refused.text);
    const rows = () => audits().map((a) => [a.action, a.key, a.subject ?? null, a.status]);
    assertEquals(rows(), [
      ["webhook.add", "ops", "https://hooks.example.com/ferry/in", added.status],
      ["webhook.add", "ops", null, 400],
    ]);
    assertEquals(added.status, 201, added.text);
    const id = (added.body as { id: string }).id;
    assertEquals((await call(b.url, "DELETE", `/api/webhooks/${id}`, h)).status, 200);
    assertEquals(rows()[2], ["webhook.delete", "ops", "https://hooks.example.com/ferry/in", 200]);
    const all = lines.join("\n");
    for (const secret of ["pa55word", "t0ken", "s3cret", KEYS.admin]) {
      assert(!all.includes(secret), `the log shows ${secret}`);
    }
  } finally {
    await b.close();
  }
});

Deno.test("auth: a metrics key reads /metrics and /api/stats and nothing else; admin still reads metrics", async () => {
  const b = await startBroker({
    apiKeys: `${KEYS.metrics}:metrics,${KEYS.admin}:admin,${KEYS.publish}:publish+consume`,
  });
  try {
    const m = { headers: bearer(KEYS.metrics) };
    const scrape = await call(b.url, "GET", "/metrics", m);
    assertEquals(scrape.status, 200, scrape.text);
    assert(scrape.text.includes("# HELP ferry_"), scrape.text);
    assertEquals((await call(b.url, "GET", "/api/stats", m)).status, 200);
    assertProblem(await call(b.url, "GET", "/api/queues", m), 403, "forbidden");
    assertProblem(await call(b.url, "POST", "/publish/t", { ...m, body: "x" }), 403, "forbidden");
    assertProblem(await call(b.url, "GET", "/consume/t", m), 403, "forbidden");
    assertProblem(await call(b.url, "POST", "/api/drain", m), 403, "forbidden");
    assertProblem(
      await call(b.url, "DELETE", "/api/topics/t", m),
      403,
      "forbidden",
    );
    assertEquals(
      (await call(b.url, "GET", "/metrics", { headers: bearer(KEYS.admin) })).status,
      200,
    );
    const app = await call(b.url, "GET", "/metrics", { headers: bearer(KEYS.publish) });
    assertProblem(app, 403, "forbidden");
    assert(app.text.includes('lacks the \\"metrics\\" scope'), app.text);
  } finally {
    await b.close();
  }
});
