/**
 * GET /dashboard and /dashboard/{file}: the dashboard's files from `static/`, public (docs/operating.md:
 * the static files need no key, the data they fetch always does). The files are read once, on
 * the first request, and kept in memory with their gzip and Brotli forms: they are small, and
 * Deno.serve compresses nothing by itself (measured on 2.9.6). Each answer carries a weak ETag
 * and `Cache-Control: no-cache`, so a browser revalidates every file on each load (a 304 when
 * unchanged) and never runs a stale module after an upgrade; names without content hashes keep
 * `static/` servable as-is, with no build step.
 */

import { BrokerError } from "../lib/errors.ts";
import type { Ctx, Route } from "./router.ts";
import type { RouteDoc } from "./route_doc.ts";

/** Where the files are: beside routes/, so a checkout and `deno compile --include static` work. */
export const STATIC_DIR = new URL("../static/", import.meta.url);

/** Content types by extension; a file with another extension is never served. */
const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
};
/** Types worth compressing (PNG and ICO are compressed already). */
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".svg"]);
/** Files smaller than this go out as they are: compression would save less than a packet. */
const COMPRESS_MIN_BYTES = 1024;

/** The page's own rules: only its own scripts, styles and API; never framed. */
const HTML_HEADERS: Record<string, string> = {
  "content-security-policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** One file, ready to send in each encoding it has. */
export interface Asset {
  type: string;
  etag: string;
  identity: Uint8Array<ArrayBuffer>;
  gzip?: Uint8Array<ArrayBuffer>;
  br?: Uint8Array<ArrayBuffer>;
}

async function gzipOf(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Brotli from `node:zlib`, imported on the first file compressed: the import loads Deno's Node
 * compatibility layer, about 20 ms (measured), which a broker nobody opens the dashboard of
 * should not pay at every start.
 */
async function brOf(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  const { brotliCompress, constants } = await import("node:zlib");
  const out = await new Promise<Uint8Array>((resolve, reject) =>
    brotliCompress(
      bytes,
      { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } },
      (err, result) => err ? reject(err) : resolve(result),
    )
  );
  return new Uint8Array(out);
}

function extOf(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot < 0 ? "" : name.slice(dot);
}

/** One file as an Asset: its type, a weak ETag from its SHA-256, and smaller encodings. */
export async function asset(name: string, bytes: Uint8Array<ArrayBuffer>): Promise<Asset> {
  const ext = extOf(name);
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const etag = `W/"${
    Array.from(hash.subarray(0, 12), (b) => b.toString(16).padStart(2, "0")).join("")
  }"`;
  const a: Asset = { type: TYPES[ext] ?? "application/octet-stream", etag, identity: bytes };
  if (COMPRESSIBLE.has(ext) && bytes.length >= COMPRESS_MIN_BYTES) {
    const [gz, br] = await Promise.all([gzipOf(bytes), brOf(bytes)]);
    if (gz.length < bytes.length * 0.9) a.gzip = gz;
    if (br.length < bytes.length * 0.9) a.br = br;
  }
  return a;
}

/**
 * Every servable file of `dir` by name. Only plain files of the top level with a known
 * extension are kept, so no request can name anything else (`..`, subfolders, deno.json).
 */
export async function loadAssets(dir: URL = STATIC_DIR): Promise<Map<string, Asset>> {
  const out = new Map<string, Asset>();
  for await (const e of Deno.readDir(dir)) {
    if (!e.isFile || !(extOf(e.name) in TYPES)) continue;
    const bytes = await Deno.readFile(new URL(e.name, dir));
    out.set(e.name, await asset(e.name, bytes));
  }
  if (!out.has("index.html")) throw new Error(`no index.html in ${dir.pathname}`);
  return out;
}

/**
 * The encoding to send: Brotli, then gzip, when the client accepts it (a `q=0` refuses) and
 * the file has it; otherwise none.
 */
export function chooseEncoding(accept: string | null, a: Asset): "br" | "gzip" | undefined {
  if (!accept) return undefined;
  const q = new Map<string, boolean>(); // coding → acceptable
  for (const part of accept.toLowerCase().split(",")) {
    const [coding = "", ...params] = part.split(";").map((s) => s.trim());
    const weight = params.find((p) => p.startsWith("q="));
    q.set(coding, !weight || Number(weight.slice(2)) > 0);
  }
  const ok = (coding: string) => q.get(coding) ?? q.get("*") ?? false;
  if (a.br && ok("br")) return "br";
  if (a.gzip && (ok("gzip") || q.get("x-gzip"))) return "gzip";
  return undefined;
}

/** True when If-None-Match names this ETag (weak comparison, as RFC 9110 asks for GET). */
function notModified(ifNoneMatch: string | null, etag: string): boolean {
  if (ifNoneMatch === null) return false;
  if (ifNoneMatch.trim() === "*") return true;
  const bare = etag.replace(/^W\//, "");
  return ifNoneMatch.split(",").some((t) => t.trim().replace(/^W\//, "") === bare);
}

/** The answer for one file: 200 in the best encoding, or 304 when the client has it. */
export function serveAsset(req: Request, name: string, a: Asset): Response {
  const headers: Record<string, string> = {
    "content-type": a.type,
    etag: a.etag,
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
  };
  if (a.gzip || a.br) headers.vary = "accept-encoding";
  if (name.endsWith(".html")) Object.assign(headers, HTML_HEADERS);
  if (notModified(req.headers.get("if-none-match"), a.etag)) {
    return new Response(null, { status: 304, headers });
  }
  const encoding = chooseEncoding(req.headers.get("accept-encoding"), a);
  if (encoding) headers["content-encoding"] = encoding;
  return new Response(encoding ? a[encoding] : a.identity, { headers });
}

/** The routes over the files of `dir`, loaded on first use (a failed load is tried again). */
export function staticRoutes(dir: URL = STATIC_DIR): Route[] {
  let assets: Promise<Map<string, Asset>> | undefined;

  async function file(req: Request, ctx: Ctx): Promise<Response> {
    const name = ctx.params.file || "index.html";
    let files: Map<string, Asset>;
    try {
      files = await (assets ??= loadAssets(dir));
    } catch (e) {
      assets = undefined;
      throw new BrokerError(
        "unavailable",
        `Cannot serve the dashboard: its files in ${dir.pathname} cannot be read: ${
          (e as Error).message
        }`,
      );
    }
    const a = files.get(name);
    if (!a) throw new BrokerError("not_found", `No dashboard file ${JSON.stringify(name)}`);
    return serveAsset(req, name, a);
  }

  // `/dashboard` and `/dashboard/` match with `file` empty: the page itself.
  return [{
    method: "GET",
    pattern: "/dashboard/:file",
    scope: "public",
    handler: file,
    doc: DOC,
    cluster: "always", // public files, the same on every node
  }];
}

const DOC: RouteDoc = {
  operationId: "dashboardFile",
  summary: "A file of the web dashboard",
  description: "The dashboard's page and modules, public. `GET /dashboard` (no file) answers " +
    "`index.html`. Brotli or gzip when the client accepts it; `ETag` and `Cache-Control: " +
    "no-cache`, so a browser revalidates each file and gets 304 when it has it.",
  tag: "Reference",
  path: {
    file: {
      name: "file",
      in: "path",
      description: "A top-level file of `static/` (`index.html`, `app.js`, `style.css`, …).",
      schema: { type: "string", pattern: "^[A-Za-z0-9_.-]+$" },
    },
  },
  ok: {
    200: {
      description: "The file.",
      content: Object.fromEntries(
        [...new Set(Object.values(TYPES))].map((t) => [t.split(";")[0]!, {}]),
      ),
    },
    304: { description: "Not modified (`If-None-Match`)." },
  },
  errors: ["not_found", "unavailable"],
};
