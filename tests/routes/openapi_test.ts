/**
 * GET /openapi.json: every route of ROUTES is documented and nothing else is, the document is
 * valid OpenAPI 3.1 (a real validator from npm) with schemas that compile under ajv's strict
 * 2020-12 mode, scopes and key transports are those the auth hook enforces, and the document and
 * the reference page are public, cached and compressed.
 */

import { Validator } from "@seriousme/openapi-schema-validator";
import { assert, assertEquals } from "../_support/assert.ts";
import { call } from "../_support/http.ts";
import { strictAjv } from "../_support/contract.ts";
import { startBroker, withBroker } from "../_support/server.ts";
import { ROUTES } from "../../routes/app.ts";
import { takesQueryKey } from "../../routes/auth.ts";
import {
  openApiDocument,
  openApiPath,
  pathParamDoc,
  pathParams,
  undocumented,
} from "../../routes/openapi.ts";
import type { Route } from "../../routes/router.ts";
import { VERSION } from "../../lib/config.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

const METHODS = ["get", "put", "post", "delete", "patch", "options", "trace"];
const key = (r: Pick<Route, "method" | "pattern">) => `${r.method} ${r.pattern}`;

/** `METHOD /path/{param}` of every operation of a document (HEAD refusals aside). */
function operations(doc: Json): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths)) {
    for (const m of METHODS) if (item[m]) out.push(`${m.toUpperCase()} ${path}`);
  }
  return out.sort();
}

Deno.test("ROUTES: every route has documentation (Route.doc)", () => {
  assertEquals(
    undocumented(ROUTES).map(key),
    [],
    "document these routes: give each a `doc` (routes/route_doc.ts) beside its handler",
  );
});

Deno.test("undocumented() names a route added without documentation", () => {
  const added: Route = {
    method: "GET",
    pattern: "/api/new",
    scope: "admin",
    handler: () => new Response(),
  };
  assertEquals(undocumented([...ROUTES, added]).map(key), ["GET /api/new"]);
});

Deno.test("route docs name only the path parameters their patterns have, and each of them", () => {
  for (const r of ROUTES) {
    for (const name of pathParams(r.pattern)) {
      assert(pathParamDoc(r, name), `${key(r)}: document path parameter "${name}" (doc.path)`);
    }
    for (const name of Object.keys(r.doc?.path ?? {})) {
      assert(
        pathParams(r.pattern).includes(name),
        `${key(r)} documents "${name}", not in its path`,
      );
    }
  }
});

Deno.test("the document has an operation for each route of ROUTES and for nothing else", () => {
  const doc = openApiDocument(ROUTES, VERSION);
  const routes = ROUTES.map((r) => `${r.method} ${openApiPath(r.pattern)}`).sort();
  assertEquals(operations(doc), routes);
  const ids = operations(doc).map((o) => {
    const [m, p] = o.split(" ") as [string, string];
    return (doc.paths as Json)[p][m.toLowerCase()].operationId;
  });
  assertEquals(new Set(ids).size, ids.length, `operationIds repeat: ${ids}`);
});

Deno.test("each operation's scope and key transports are those routes/auth.ts enforces", () => {
  const doc: Json = openApiDocument(ROUTES, VERSION);
  for (const r of ROUTES) {
    const op = doc.paths[openApiPath(r.pattern)][r.method.toLowerCase()];
    assertEquals(op["x-ferry-scope"], r.scope, key(r));
    const schemes = op.security.map((s: Json) => Object.keys(s)[0]).sort();
    if (r.scope === "public") {
      assertEquals(schemes, [], key(r));
      assert(!op.responses["401"], `${key(r)} is public: no 401`);
    } else {
      const want = ["apiKeyHeader", "bearerAuth", ...(takesQueryKey(r) ? ["apiKeyQuery"] : [])];
      assertEquals(schemes, want.sort(), key(r));
      for (const s of op.security) assertEquals(Object.values(s)[0], [r.scope], key(r));
      assert(op.responses["401"] && op.responses["403"], `${key(r)} documents 401 and 403`);
    }
  }
});

Deno.test("GET /openapi.json is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator)", async () => {
  await withBroker({}, async (b) => {
    const res = await b.call("GET", "/openapi.json");
    assertEquals(res.status, 200);
    assertEquals(res.body, JSON.parse(JSON.stringify(openApiDocument(ROUTES, VERSION))));
    const validator = new Validator();
    const result = await validator.validate(res.body);
    assertEquals(result, { valid: true }, JSON.stringify(result.errors, null, 2)?.slice(0, 4000));
    assertEquals(validator.version, "3.1");
  });
});

Deno.test("every schema of the document compiles under ajv's strict 2020-12 mode", () => {
  const doc: Json = openApiDocument(ROUTES, VERSION);
  const { compile } = strictAjv(doc, { strictSchemas: false });
  const schemas: Json[] = Object.keys(doc.components.schemas).map((name) => ({
    $ref: `#/components/schemas/${name}`,
  }));
  const visit = (op: Json) => {
    for (const p of op.parameters ?? []) schemas.push(p.schema);
    for (const m of Object.values<Json>(op.requestBody?.content ?? {})) schemas.push(m.schema);
    for (const r of Object.values<Json>(op.responses ?? {})) {
      for (const m of Object.values<Json>(r.content ?? {})) {
        schemas.push(m.schema);
        if (m["x-ferry-event"]) schemas.push(m["x-ferry-event"]);
      }
    }
  };
  for (const item of Object.values<Json>(doc.paths)) {
    for (const op of Object.values<Json>(item)) visit(op);
  }
  visit(doc.webhooks.message.post);
  for (const s of schemas.filter(Boolean)) compile(s);
});

Deno.test("/openapi.json and /docs are public when API keys are on; the rest is not", async () => {
  const b = await startBroker({ apiKeys: "k1:admin" });
  try {
    for (const path of ["/openapi.json", "/docs", "/docs/init.js", "/docs/swagger-ui.css"]) {
      assertEquals((await call(b, "GET", path)).status, 200, path);
    }
    assertEquals((await call(b, "GET", "/api/stats")).status, 401);
  } finally {
    await b.close();
  }
});

Deno.test("/openapi.json and /docs files: gzip when asked, 304 for their ETag", async () => {
  await withBroker({}, async (b) => {
    for (const path of ["/openapi.json", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"]) {
      const res = await fetch(b.url + path, { headers: { "accept-encoding": "gzip" } });
      const raw = new Uint8Array(await res.arrayBuffer()); // fetch decodes it
      assertEquals(res.status, 200, path);
      assertEquals(res.headers.get("content-encoding"), "gzip", path);
      assert(raw.length > 1000, path);
      const etag = res.headers.get("etag")!;
      assert(etag, path);
      const again = await call(b, "GET", path, { headers: { "if-none-match": etag } });
      assertEquals(again.status, 304, path);
    }
    const page = await call(b, "GET", "/docs");
    assertEquals(page.headers.get("content-type"), "text/html; charset=utf-8");
    assert(page.headers.get("content-security-policy")?.startsWith("default-src 'self'"));
    assert(page.text.includes('src="docs/swagger-ui-bundle.js"'));
  });
});

Deno.test("GET /docs/{file} answers 404 for anything but the page's files", async () => {
  await withBroker({}, async (b) => {
    for (const path of ["/docs/index.html", "/docs/..%2Fdeno.json", "/docs/__proto__"]) {
      const res = await b.call("GET", path);
      assertEquals(res.status, 404, path);
      assertEquals(res.body.code, "not_found", path);
    }
  });
});
