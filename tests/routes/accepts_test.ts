/**
 * Unknown query parameters and JSON body fields are refused (routes/accepts.ts): the three
 * misspellings that used to pass silently, then the whole route table — every route refuses an
 * unknown query parameter, every JSON-body route an unknown field, each naming what it accepts,
 * which is exactly what its documentation (and so GET /openapi.json) lists.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { assertProblem, type Json } from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { createHandler, ROUTES } from "../../routes/app.ts";
import { takesQueryKey } from "../../routes/auth.ts";
import { openApiPath } from "../../routes/openapi.ts";
import type { Param, Schema } from "../../routes/route_doc.ts";
import type { Route } from "../../routes/router.ts";

const UNKNOWN = "zz_unknown";
const ID = "0190b8a2-0000-7000-8000-000000000001";
/** A value for each path parameter a route may have. */
const PATH_VALUES: Record<string, string> = { topic: "t1", name: "t1", id: ID, file: "index.html" };

/** Asserts that `text` contains `part`. */
function assertStringIncludes(text: string, part: string): void {
  assert(text.includes(part), `expected ${JSON.stringify(part)} in ${JSON.stringify(text)}`);
}

/** `POST /publish/{topic}`: how a refusal names a route. */
const label = (r: Route) => `${r.method} ${openApiPath(r.pattern)}`;

/** The route's path with its parameters filled in. */
function pathOf(r: Route): string {
  return r.pattern.replace(/:(\w+)/g, (_, name: string) => PATH_VALUES[name] ?? "x1");
}

/** A valid value for a documented query parameter, from its schema. */
function example(p: Param): string {
  const s = p.schema as Json;
  if (s.enum) return String(s.enum[0]);
  if (s.type === "boolean") return "true";
  if (s.type === "integer") return String(s.minimum ?? 1);
  if (s["x-ferry-min-ms"] !== undefined) return s["x-ferry-min-ms"] > 0 ? "1s" : "0s";
  if (s.pattern === "^[0-9]{1,15}$") return "1";
  if (s.examples) return String(s.examples[0]);
  return "x1";
}

/** The query parameters a route documents. */
function documentedQuery(r: Route): string[] {
  return (r.doc?.params ?? []).filter((p) => p.in === "query").map((p) => p.name);
}

/** The query parameters a route must accept: its documented ones, and `api_key` where auth reads it. */
function acceptedQuery(r: Route): string[] {
  return [...documentedQuery(r), ...(takesQueryKey(r) ? ["api_key"] : [])];
}

/** `?name=value&…` of the required query parameters of a route (so its handler gets to the body). */
function requiredQuery(r: Route): string {
  const required = (r.doc?.params ?? []).filter((p) => p.in === "query" && p.required);
  return required.map((p) => `${p.name}=${encodeURIComponent(example(p))}`).join("&");
}

/** The object schema of a JSON body: the body's own, or its items' for an array body. */
function objectSchema(body: Schema): Json {
  return body.type === "array" ? body.items : body;
}

/** The names listed after "accepted: " in a refusal's detail ([] for "it takes none"). */
function listed(detail: string): string[] {
  const i = detail.lastIndexOf("; accepted: ");
  if (i < 0) {
    assertStringIncludes(detail, "it takes none");
    return [];
  }
  return detail.slice(i + "; accepted: ".length).split(", ");
}

/** Drain ends the broker's service: last. */
function drainLast(routes: readonly Route[]): Route[] {
  return [...routes].sort((a, b) =>
    Number(a.pattern === "/api/drain") - Number(b.pattern === "/api/drain")
  );
}

/** A handler over a fresh in-memory broker, and the answers it gives (streams cut short). */
async function withHandler(
  fn: (send: (method: string, path: string, init?: RequestInit) => Promise<Answer>) => Promise<
    void
  >,
): Promise<void> {
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:" }), { tick: false });
  try {
    const handle = createHandler(broker);
    await fn(async (method, path, init = {}) => {
      const res = await handle(new Request(`http://ferry${path}`, { method, ...init }));
      if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        await res.body?.cancel();
        return { status: res.status, body: undefined };
      }
      const text = await res.text();
      let body: Json;
      try {
        body = JSON.parse(text);
      } catch { /* not JSON */ }
      return { status: res.status, body };
    });
  } finally {
    await broker.close();
  }
}
interface Answer {
  status: number;
  body: Json;
}

/** A body a route's method may carry, so the refusal is the query's and not the body's. */
function bodyFor(r: Route): RequestInit {
  if (r.method === "GET" || r.method === "DELETE") return {};
  if (r.doc?.body?.kind === "json") {
    return { body: "{}", headers: { "content-type": "application/json" } };
  }
  return { body: "x" };
}

Deno.test("POST /publish/t?tll=5s is 400 bad_request naming tll, suggesting ttl, storing nothing", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/publish/t?tll=5s", { body: "x" });
    assertProblem(res, 400, "bad_request");
    assertEquals(
      res.body.detail,
      'Unknown query parameter "tll" for POST /publish/{topic} (did you mean "ttl"?); ' +
        "accepted: ttl, delay, priority, broadcast, idempotency",
    );
    assertEquals((await ctx.call("GET", "/api/queues")).body, [], "nothing was published");
  });
});

Deno.test("GET /consume/t?grup=x is 400 bad_request naming grup and suggesting group", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/publish/t", { body: "x" });
    const res = await ctx.call("GET", "/consume/t?grup=x");
    assertProblem(res, 400, "bad_request");
    assertStringIncludes(
      res.body.detail,
      'Unknown query parameter "grup" for GET /consume/{topic}',
    );
    assertStringIncludes(res.body.detail, '(did you mean "group"?)');
    assertEquals(listed(res.body.detail), documentedQuery(routeOf("GET", "/consume/:topic")));
    const m = await ctx.call("GET", "/consume/t");
    assertEquals(m.status, 200, "the message was not taken by the refused consume");
  });
});

Deno.test('POST /api/topics {"retention":"1h"} is 400 naming retention and listing retain', async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/topics", { json: { name: "x", retention: "1h" } });
    assertProblem(res, 400, "bad_request");
    assertEquals(
      res.body.detail,
      'Unknown field "retention" in the JSON body of POST /api/topics; accepted: name, policy, ' +
        "retain, visibility, max_messages, max_bytes",
    );
    assertProblem(await ctx.call("GET", "/api/topics/x"), 404, "not_found");
    const ok = await ctx.call("POST", "/api/topics", { json: { name: "x", retain: "1h" } });
    assertEquals([ok.status, ok.body.retain], [201, "1h"], JSON.stringify(ok.body));
  });
});

function routeOf(method: string, pattern: string): Route {
  const r = ROUTES.find((r) => r.method === method && r.pattern === pattern);
  assert(r, `${method} ${pattern} is in ROUTES`);
  return r;
}

Deno.test("every route refuses an unknown query parameter: 400 bad_request naming it and what it accepts", async () => {
  await withHandler(async (send) => {
    const wrong: string[] = [];
    for (const r of drainLast(ROUTES)) {
      const res = await send(r.method, `${pathOf(r)}?${UNKNOWN}=1`, bodyFor(r));
      const detail = String(res.body?.detail ?? "");
      const prefix = `Unknown query parameter "${UNKNOWN}" for ${label(r)}`;
      if (res.status !== 400 || res.body?.code !== "bad_request" || !detail.startsWith(prefix)) {
        wrong.push(`${label(r)}: ${res.status} ${detail}`);
        continue;
      }
      const accepted = listed(detail);
      if (accepted.join() !== acceptedQuery(r).join()) {
        wrong.push(`${label(r)} lists ${accepted}, documents ${acceptedQuery(r)}`);
      }
    }
    assertEquals(wrong, []);
  });
});

Deno.test("every documented query parameter (and api_key where auth reads it) is accepted", async () => {
  await withHandler(async (send) => {
    const wrong: string[] = [];
    for (const r of ROUTES) {
      const params = (r.doc?.params ?? []).filter((p) => p.in === "query");
      const values: [string, string][] = params.map((p) => [p.name, example(p)]);
      if (takesQueryKey(r)) values.push(["api_key", "k"]);
      for (const [name, value] of values) {
        const res = await send(r.method, `${pathOf(r)}?${name}=${value}`, bodyFor(r));
        const detail = String(res.body?.detail ?? "");
        if (detail.startsWith("Unknown")) wrong.push(`${label(r)} ?${name}=${value}: ${detail}`);
      }
    }
    assertEquals(wrong, []);
  });
});

Deno.test("api_key where auth does not read it is refused with where the key goes", async () => {
  await withHandler(async (send) => {
    const res = await send("POST", "/publish/t?api_key=k", { body: "x" });
    assertEquals([res.status, res.body.code], [400, "bad_request"]);
    assertStringIncludes(res.body.detail, 'Unknown query parameter "api_key"');
    assertStringIncludes(res.body.detail, "Authorization: Bearer");
  });
});

Deno.test("every JSON-body route documents a closed object (additionalProperties: false)", () => {
  for (const r of ROUTES) {
    if (r.doc?.body?.kind !== "json") continue;
    const s = objectSchema(r.doc.body.schema);
    assertEquals(s.type, "object", label(r));
    assertEquals(s.additionalProperties, false, `${label(r)}: close its body schema`);
  }
});

Deno.test("every JSON-body route refuses an unknown field: 400 bad_request naming it and the fields it takes", async () => {
  await withHandler(async (send) => {
    const wrong: string[] = [];
    let routes = 0;
    for (const r of ROUTES) {
      if (r.doc?.body?.kind !== "json") continue;
      routes++;
      const array = r.doc.body.schema.type === "array";
      const body = JSON.stringify(array ? [{ [UNKNOWN]: 1 }] : { [UNKNOWN]: 1 });
      const q = requiredQuery(r);
      const res = await send(r.method, `${pathOf(r)}${q ? `?${q}` : ""}`, {
        body,
        headers: { "content-type": "application/json" },
      });
      const detail = String(res.body?.detail ?? "");
      if (
        res.status !== 400 || res.body?.code !== "bad_request" ||
        !detail.includes(`nknown field "${UNKNOWN}"`)
      ) {
        wrong.push(`${label(r)}: ${res.status} ${detail}`);
        continue;
      }
      const fields = Object.keys(objectSchema(r.doc.body.schema).properties);
      if (listed(detail).join() !== fields.join()) {
        wrong.push(`${label(r)} lists ${listed(detail)}, documents ${fields}`);
      }
    }
    assert(routes >= 9, `only ${routes} JSON-body routes found`);
    assertEquals(wrong, []);
  });
});

Deno.test("every documented JSON body field is accepted", async () => {
  await withHandler(async (send) => {
    const wrong: string[] = [];
    for (const r of ROUTES) {
      if (r.doc?.body?.kind !== "json") continue;
      const array = r.doc.body.schema.type === "array";
      const fields = Object.keys(objectSchema(r.doc.body.schema).properties);
      for (const field of fields) {
        const one = { [field]: null };
        const q = requiredQuery(r);
        const res = await send(r.method, `${pathOf(r)}${q ? `?${q}` : ""}`, {
          body: JSON.stringify(array ? [one] : one),
          headers: { "content-type": "application/json" },
        });
        const detail = String(res.body?.detail ?? "");
        if (/nknown field/.test(detail)) wrong.push(`${label(r)} "${field}": ${detail}`);
      }
    }
    assertEquals(wrong, []);
  });
});
