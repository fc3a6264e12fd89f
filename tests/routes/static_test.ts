/**
 * The dashboard's files (routes/static.ts) over HTTP: content types, ETag revalidation, gzip and
 * Brotli when asked, HEAD, no way out of static/, public even with API keys on (while the data
 * routes still need a key), and the start task's permissions.
 */

import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { spawnBroker, stop } from "../_support/child.ts";
import { assertProblem, call } from "../_support/http.ts";
import { startBroker, withBroker } from "../_support/server.ts";
import { createHandler } from "../../routes/app.ts";
import { chooseEncoding, loadAssets, STATIC_DIR, staticRoutes } from "../../routes/static.ts";

/** One HTTP/1.1 exchange over a raw socket: the path goes out exactly as written. */
async function rawGet(
  base: string,
  path: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<{ status: number; headers: Headers; body: Uint8Array }> {
  const { hostname, port } = new URL(base);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  try {
    const lines = [`${method} ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, "Connection: close"];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    await conn.write(new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(64 * 1024);
    while (true) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    const all = new Uint8Array(chunks.reduce((s, c) => s + c.length, 0));
    let at = 0;
    for (const c of chunks) all.set(c, (at += c.length) - c.length);
    const text = new TextDecoder("latin1").decode(all);
    const end = text.indexOf("\r\n\r\n");
    const [statusLine, ...headerLines] = text.slice(0, end).split("\r\n");
    const h = new Headers();
    for (const l of headerLines) {
      const i = l.indexOf(":");
      h.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
    }
    let body: Uint8Array = all.slice(end + 4);
    if (h.get("transfer-encoding") === "chunked") body = unchunk(body);
    return { status: Number(statusLine!.split(" ")[1]), headers: h, body };
  } finally {
    try {
      conn.close();
    } catch { /* closed by the server */ }
  }
}

/** The payload of a chunked body. */
function unchunk(b: Uint8Array): Uint8Array {
  const out: number[] = [];
  let i = 0;
  const text = new TextDecoder("latin1");
  while (i < b.length) {
    const eol = b.indexOf(13, i);
    const size = parseInt(text.decode(b.slice(i, eol)), 16);
    if (!size) break;
    out.push(...b.slice(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return new Uint8Array(out);
}

/** The dashboard's own files, as the route would serve them. */
const FILES = await loadAssets();

Deno.test("GET /dashboard answers the page: HTML, no-cache, an ETag and a strict CSP", async () => {
  await withBroker({}, async (ctx) => {
    for (const path of ["/dashboard", "/dashboard/", "/dashboard/index.html"]) {
      const res = await call(ctx.url, "GET", path);
      assertEquals(res.status, 200, `${path}: ${res.text}`);
      assertEquals(res.headers.get("content-type"), "text/html; charset=utf-8");
      assertEquals(res.headers.get("cache-control"), "no-cache");
      assertEquals(res.headers.get("etag"), FILES.get("index.html")!.etag);
      assertEquals(res.headers.get("x-content-type-options"), "nosniff");
      assertMatch(res.headers.get("content-security-policy") ?? "", /default-src 'self'/);
      assertMatch(res.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
      assert(res.text.includes('src="/dashboard/app.js"'), res.text);
      assert(res.headers.get("x-request-id"));
    }
  });
});

Deno.test("every module the page loads is served as JavaScript, and the styles as CSS", async () => {
  await withBroker({}, async (ctx) => {
    const index = (await call(ctx.url, "GET", "/dashboard")).text;
    const refs = [...index.matchAll(/(?:src|href)="\/dashboard\/([^"]+)"/g)].map((m) => m[1]!);
    assertEquals(new Set(refs), new Set(["favicon.svg", "style.css", "app.js"]));
    // Walk the module graph from app.js: every relative import must be a served module.
    const seen = new Set<string>();
    const queue = ["app.js"];
    while (queue.length) {
      const file = queue.shift()!;
      if (seen.has(file)) continue;
      seen.add(file);
      const res = await call(ctx.url, "GET", `/dashboard/${file}`);
      assertEquals(res.status, 200, `${file}: ${res.text}`);
      assertEquals(res.headers.get("content-type"), "text/javascript; charset=utf-8", file);
      for (const m of res.text.matchAll(/from "\.\/([a-z_]+\.js)"/g)) queue.push(m[1]!);
    }
    assert(seen.size >= 8, `modules: ${[...seen]}`);
    const types: Record<string, string> = {
      "style.css": "text/css; charset=utf-8",
      "favicon.svg": "image/svg+xml",
    };
    for (const [file, type] of Object.entries(types)) {
      const res = await call(ctx.url, "GET", `/dashboard/${file}`);
      assertEquals(res.status, 200, file);
      assertEquals(res.headers.get("content-type"), type, file);
      assertEquals(res.headers.get("content-security-policy"), null, "only the page has a CSP");
    }
  });
});

Deno.test("a request with the file's ETag in If-None-Match gets 304 without a body", async () => {
  await withBroker({}, async (ctx) => {
    const first = await call(ctx.url, "GET", "/dashboard/app.js");
    const etag = first.headers.get("etag")!;
    assertMatch(etag, /^W\/"[0-9a-f]{24}"$/);
    for (const inm of [etag, etag.slice(2), `"other", ${etag}`, "*"]) {
      const res = await call(ctx.url, "GET", "/dashboard/app.js", {
        headers: { "if-none-match": inm },
      });
      assertEquals(res.status, 304, inm);
      assertEquals(res.text, "");
      assertEquals(res.headers.get("etag"), etag);
      assertEquals(res.headers.get("cache-control"), "no-cache");
    }
    const changed = await call(ctx.url, "GET", "/dashboard/app.js", {
      headers: { "if-none-match": 'W/"0000"' },
    });
    assertEquals(changed.status, 200);
    assertEquals(changed.text, first.text);
    // Every file has its own tag.
    const css = await call(ctx.url, "GET", "/dashboard/style.css");
    assert(css.headers.get("etag") !== etag);
  });
});

Deno.test("Accept-Encoding gets Brotli or gzip, the same bytes, and Vary: accept-encoding", async () => {
  await withBroker({}, async (ctx) => {
    for (const file of ["app.js", "style.css", "index.html"]) {
      const path = `/dashboard/${file}`;
      const plain = await rawGet(ctx.url, path);
      assertEquals(plain.status, 200);
      assertEquals(plain.headers.get("content-encoding"), null);
      assertEquals(plain.headers.get("vary"), "accept-encoding");

      const br = await rawGet(ctx.url, path, { "accept-encoding": "gzip, deflate, br, zstd" });
      assertEquals(br.headers.get("content-encoding"), "br", file);
      assertEquals(br.headers.get("vary"), "accept-encoding");
      assert(br.body.length < plain.body.length * 0.6, `${file}: ${br.body.length}`);
      assertEquals(new Uint8Array(brotliDecompressSync(br.body)), plain.body);

      const gz = await rawGet(ctx.url, path, { "accept-encoding": "gzip" });
      assertEquals(gz.headers.get("content-encoding"), "gzip", file);
      assert(gz.body.length < plain.body.length * 0.7, `${file}: ${gz.body.length}`);
      assertEquals(new Uint8Array(gunzipSync(gz.body)), plain.body);

      const refused = await rawGet(ctx.url, path, { "accept-encoding": "br;q=0, gzip;q=0.5" });
      assertEquals(refused.headers.get("content-encoding"), "gzip");
      // The ETag names the content, whatever the encoding.
      assertEquals(gz.headers.get("etag"), plain.headers.get("etag"));
    }
    // A small file goes out as it is.
    const icon = await rawGet(ctx.url, "/dashboard/favicon.svg", { "accept-encoding": "br" });
    assertEquals(icon.headers.get("content-encoding"), null);
  });
});

Deno.test("chooseEncoding() honours q=0, * and what the file has", () => {
  const both = {
    type: "",
    etag: "",
    identity: new Uint8Array(),
    gzip: new Uint8Array(),
    br: new Uint8Array(),
  };
  assertEquals(chooseEncoding(null, both), undefined);
  assertEquals(chooseEncoding("identity", both), undefined);
  assertEquals(chooseEncoding("gzip", both), "gzip");
  assertEquals(chooseEncoding("GZIP, BR", both), "br");
  assertEquals(chooseEncoding("br;q=0", both), undefined);
  assertEquals(chooseEncoding("br;q=0, *", both), "gzip");
  assertEquals(chooseEncoding("*;q=0", both), undefined);
  assertEquals(chooseEncoding("*", both), "br");
  assertEquals(chooseEncoding("br", { ...both, br: undefined }), undefined);
  assertEquals(chooseEncoding("x-gzip", both), "gzip");
});

Deno.test("HEAD /dashboard/{file} answers the headers of GET without a body", async () => {
  await withBroker({}, async (ctx) => {
    const get = await rawGet(ctx.url, "/dashboard/app.js");
    const head = await rawGet(ctx.url, "/dashboard/app.js", {}, "HEAD");
    assertEquals(head.status, 200);
    assertEquals(head.body.length, 0);
    assertEquals(head.headers.get("content-type"), "text/javascript; charset=utf-8");
    assertEquals(head.headers.get("etag"), get.headers.get("etag"));
    assertEquals(head.headers.get("content-length"), String(get.body.length));
  });
});

Deno.test("no path reaches outside static/ or a file that is not served", async () => {
  await withBroker({}, async (ctx) => {
    const paths = [
      "/dashboard/../deno.json",
      "/dashboard/../../etc/passwd",
      "/dashboard/..%2Fdeno.json",
      "/dashboard/..%2f..%2froutes%2fstatic.ts",
      "/dashboard/%2e%2e%2fmain.ts",
      "/dashboard/%2E%2E/main.ts",
      "/dashboard/deno.json", // in static/, but not a served type
      "/dashboard/app.js%00.html",
      "/dashboard/.",
      "/dashboard/..",
      "/dashboard/%2Fetc%2Fpasswd",
      "/dashboard/sub/app.js",
      "/dashboard//app.js",
      "/dashboard/app.js/",
      "/dashboard/nope.js",
      "/dashboard/APP.JS",
    ];
    for (const path of paths) {
      const res = await rawGet(ctx.url, path);
      const text = new TextDecoder().decode(res.body);
      assert([400, 404].includes(res.status), `${path}: ${res.status} ${text.slice(0, 200)}`);
      assertEquals(res.headers.get("content-type"), "application/problem+json", path);
      assert(!text.includes('"nodeModulesDir"') && !text.includes("root:"), `${path}: ${text}`);
    }
    const bad = await rawGet(ctx.url, "/dashboard/%E0%A4%A");
    assertEquals(bad.status, 400);
    const post = await call(ctx.url, "POST", "/dashboard/app.js", { body: "x" });
    assertProblem(post, 405, "method_not_allowed");
  });
});

Deno.test("the dashboard's files are public with API keys on; its data is not", async () => {
  const b = await startBroker({ apiKeys: "dash-key-1,pub-key-2:publish" });
  try {
    for (const path of ["/dashboard", "/dashboard/app.js", "/dashboard/style.css"]) {
      assertEquals((await call(b.url, "GET", path)).status, 200, path);
    }
    assertProblem(await call(b.url, "GET", "/api/queues"), 401, "unauthorized");
    assertProblem(await call(b.url, "GET", "/api/stats"), 401, "unauthorized");
    assertProblem(await call(b.url, "GET", "/api/queues/peek?queue=a"), 401, "unauthorized");
    const withKey = await call(b.url, "GET", "/api/queues", {
      headers: { authorization: "Bearer dash-key-1" },
    });
    assertEquals(withKey.status, 200);
    const noScope = await call(b.url, "GET", "/api/queues", {
      headers: { authorization: "Bearer pub-key-2" },
    });
    assertProblem(noScope, 403, "forbidden");
    // A key sent to a static file changes nothing.
    const keyed = await call(b.url, "GET", "/dashboard/app.js", {
      headers: { authorization: "Bearer wrong" },
    });
    assertEquals(keyed.status, 200);
  } finally {
    await b.close();
  }
});

Deno.test("staticRoutes() answers 503 with the reason when its folder cannot be read, then recovers", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-static-" });
  const b = await startBroker({ dataDir: ":memory:" });
  try {
    const url = new URL(`file://${dir}/missing/`);
    const handle = createHandler(b.broker, { routes: staticRoutes(url) });
    const res = await handle(new Request("http://x/dashboard"));
    assertEquals(res.status, 503);
    const body = await res.json();
    assertEquals(body.code, "unavailable");
    assertMatch(body.detail, /Cannot serve the dashboard: its files in .*missing/);

    await Deno.mkdir(`${dir}/missing`);
    await Deno.writeTextFile(`${dir}/missing/index.html`, "<!doctype html><title>x</title>");
    await Deno.writeTextFile(`${dir}/missing/notes.txt`, "not served");
    const ok = await handle(new Request("http://x/dashboard"));
    assertEquals(ok.status, 200);
    assertEquals(await ok.text(), "<!doctype html><title>x</title>");
    const txt = await handle(new Request("http://x/dashboard/notes.txt"));
    assertEquals(txt.status, 404);
    await txt.body?.cancel();
  } finally {
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the files resolve from the module, so any working directory serves them", () => {
  assert(STATIC_DIR.href.endsWith("/static/"));
  assert(FILES.has("index.html") && FILES.has("app.js"));
  assert(!FILES.has("deno.json"), "static/deno.json configures type checking; it is not served");
});

Deno.test("a broker started with the start task's permissions serves the dashboard", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-static-" });
  const child = await spawnBroker({ dataDir: dir });
  try {
    const res = await call(child.url, "GET", "/dashboard/app.js");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.headers.get("content-type"), "text/javascript; charset=utf-8");
  } finally {
    await stop(child, "SIGTERM");
    await Deno.remove(dir, { recursive: true });
  }
});
