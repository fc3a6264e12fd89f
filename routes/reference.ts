/**
 * GET /openapi.json (the document of the route table this handler serves, routes/openapi.ts) and
 * GET /docs, the API reference page: Swagger UI from the pinned npm package `swagger-ui-dist`,
 * served by the broker itself. Its two files are imported as text (`with { type: "text" }`)
 * when /docs is first asked for: they are part of the module graph, so `deno task start` installs
 * the package into node_modules on a fresh clone and loading them needs no `--allow-read`. Both
 * are public (docs/operating.md), and no page of them reaches outside the broker.
 */

import swaggerUiPackage from "swagger-ui-dist/package.json" with { type: "json" };
import { BrokerError } from "../lib/errors.ts";
import { openApiDocument } from "./openapi.ts";
import { asyncApiDocument } from "./asyncapi.ts";
import type { Route } from "./router.ts";
import type { RouteDoc } from "./route_doc.ts";

/** The Swagger UI release served at /docs (deno.json pins it). */
export const SWAGGER_UI_VERSION: string = swaggerUiPackage.version;

/** The page: everything from this origin, nothing inline, no request to swagger.io. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ferry API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`;

/** Starts Swagger UI on the document beside the page; `validatorUrl: null` keeps it offline. */
const INIT = `window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", location.href).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  defaultModelsExpandDepth: 0,
});
`;

/** The page's rules: own scripts only; Swagger UI sets inline styles and data: images. */
const PAGE_HEADERS: Record<string, string> = {
  "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; " +
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
};

/** One file ready to send, plainly and gzipped. */
interface Asset {
  type: string;
  etag: string;
  plain: Uint8Array<ArrayBuffer>;
  gzip: Uint8Array<ArrayBuffer>;
}

const encoder = new TextEncoder();

async function gzip(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function asset(type: string, text: string, tag: string): Promise<Asset> {
  const plain = encoder.encode(text);
  return { type, etag: `W/"${tag}"`, plain, gzip: await gzip(plain) };
}

/** The files of /docs/{file}, loaded on first use (the bundle is 1.7 MB of text). */
const FILES: Record<string, () => Promise<Asset>> = {
  "swagger-ui-bundle.js": async () =>
    asset(
      "text/javascript; charset=utf-8",
      (await import("swagger-ui-dist/swagger-ui-bundle.js", { with: { type: "text" } })).default,
      `swagger-ui-${SWAGGER_UI_VERSION}-js`,
    ),
  "swagger-ui.css": async () =>
    asset(
      "text/css; charset=utf-8",
      (await import("swagger-ui-dist/swagger-ui.css", { with: { type: "text" } })).default,
      `swagger-ui-${SWAGGER_UI_VERSION}-css`,
    ),
  "init.js": () => asset("text/javascript; charset=utf-8", INIT, `init-${SWAGGER_UI_VERSION}`),
};
const loaded = new Map<string, Promise<Asset>>();

/** An asset answer: 304 when the client has it, gzip when it takes gzip. */
function send(req: Request, a: Asset, extra: Record<string, string> = {}): Response {
  const headers: Record<string, string> = {
    "content-type": a.type,
    "cache-control": "no-cache",
    etag: a.etag,
    vary: "accept-encoding",
    ...extra,
  };
  if (req.headers.get("if-none-match") === a.etag) {
    return new Response(null, { status: 304, headers });
  }
  if (/\bgzip\b/.test(req.headers.get("accept-encoding") ?? "")) {
    headers["content-encoding"] = "gzip";
    return new Response(req.method === "HEAD" ? null : a.gzip, { headers });
  }
  return new Response(req.method === "HEAD" ? null : a.plain, { headers });
}

/** The document of each route table, built once. */
const documents = new WeakMap<readonly Route[], Promise<Asset>>();
/** The AsyncAPI document, built once. */
let asyncApi: Promise<Asset> | undefined;

const OPENAPI_DOC: RouteDoc = {
  operationId: "openapi",
  summary: "This document",
  description: "The OpenAPI 3.1 document of every route of this broker, built from the route " +
    "table: import it into Postman or Insomnia, or generate a client from it.",
  tag: "Reference",
  ok: {
    200: {
      description: "The OpenAPI document.",
      content: { "application/json": { schema: { type: "object" } } },
    },
  },
};

const ASYNCAPI_DOC: RouteDoc = {
  operationId: "asyncapi",
  summary: "The AsyncAPI document",
  description: "An AsyncAPI 3.0 document of the WebSocket (`/ws`, each frame a message) and the " +
    "server-sent events (`/stream/{topic}`), with the same schemas as this document.",
  tag: "Reference",
  ok: {
    200: {
      description: "The AsyncAPI document.",
      content: { "application/json": { schema: { type: "object" } } },
    },
  },
};

const DOCS_DOC: RouteDoc = {
  operationId: "docs",
  summary: "The API reference page",
  description: `This document rendered by Swagger UI ${SWAGGER_UI_VERSION}, served by the broker.`,
  tag: "Reference",
  ok: {
    200: { description: "The page.", content: { "text/html": { schema: { type: "string" } } } },
  },
};

const FILE_DOC: RouteDoc = {
  operationId: "docsFile",
  summary: "A file of the reference page",
  tag: "Reference",
  path: {
    file: {
      name: "file",
      in: "path",
      description: "One of the page's files.",
      schema: { type: "string", enum: Object.keys(FILES) },
    },
  },
  ok: {
    200: { description: "The file.", content: { "text/javascript": {}, "text/css": {} } },
    304: { description: "Not modified (`If-None-Match`)." },
  },
  errors: ["not_found"],
};

export const referenceRoutes: Route[] = [
  {
    method: "GET",
    pattern: "/openapi.json",
    cluster: "always",
    scope: "public",
    doc: OPENAPI_DOC,
    async handler(req, ctx) {
      let doc = documents.get(ctx.routes);
      if (!doc) {
        const text = JSON.stringify(openApiDocument(ctx.routes, ctx.broker.version));
        const tag = `openapi-${ctx.broker.version}-${text.length}`;
        doc = asset("application/json", text, tag);
        documents.set(ctx.routes, doc);
      }
      return send(req, await doc, { "access-control-allow-origin": "*" });
    },
  },
  {
    method: "GET",
    pattern: "/asyncapi.json",
    cluster: "always",
    scope: "public",
    doc: ASYNCAPI_DOC,
    async handler(req, ctx) {
      asyncApi ??= asset(
        "application/json",
        JSON.stringify(asyncApiDocument(ctx.broker.version)),
        `asyncapi-${ctx.broker.version}`,
      );
      return send(req, await asyncApi, { "access-control-allow-origin": "*" });
    },
  },
  {
    method: "GET",
    pattern: "/docs",
    cluster: "always",
    scope: "public",
    doc: DOCS_DOC,
    handler: () =>
      new Response(PAGE, {
        headers: { "content-type": "text/html; charset=utf-8", ...PAGE_HEADERS },
      }),
  },
  {
    method: "GET",
    pattern: "/docs/:file",
    cluster: "always",
    scope: "public",
    doc: FILE_DOC,
    async handler(req, ctx) {
      const name = ctx.params.file ?? "";
      const load = Object.hasOwn(FILES, name) ? FILES[name] : undefined;
      if (!load) throw new BrokerError("not_found", `No file "${name.slice(0, 64)}" in /docs`);
      let a = loaded.get(name);
      if (!a) {
        a = load();
        loaded.set(name, a);
        a.catch(() => loaded.delete(name));
      }
      return send(req, await a);
    },
  },
];
