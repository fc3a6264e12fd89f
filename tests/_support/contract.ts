/**
 * Test support: the broker's answers checked against its own OpenAPI document with ajv (2020-12,
 * strict). `Contract.check(method, path, res)` finds the operation, wants the status documented
 * and the body valid against the documented schema — objects closed (`additionalProperties:
 * false` unless the document says otherwise), so an undocumented field fails too. For a 2xx it
 * also wants the request's query parameters and JSON body documented and valid. Events, frames
 * and webhook POSTs have their own checks. Every operation a check reaches is recorded.
 */

import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import formats from "ajv-formats";
import { assert } from "./assert.ts";
import { call, type Res, type Target } from "./http.ts";
import { Query } from "../../routes/http.ts";
import { openApiPath } from "../../routes/openapi.ts";
import type { BeforeHook } from "../../routes/router.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

const METHODS = ["get", "head", "put", "post", "delete", "patch", "options", "trace"];

/** Every `x-…` key used anywhere in `v` (ajv must know them as keywords). */
function extensionKeys(v: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) { for (const x of v) extensionKeys(x, out); }
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      if (k.startsWith("x-")) out.add(k);
      extensionKeys(x, out);
    }
  }
  return out;
}

/** Closes every object schema that leaves `additionalProperties` open by saying nothing. */
function strictify(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strictify);
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = strictify(x);
  if (out.type === "object" && out.properties && !("additionalProperties" in out) && !out.allOf) {
    out.additionalProperties = false;
  }
  return out;
}

/**
 * A compiler of the document's schemas in ajv's strict 2020-12 mode, `$ref`s to
 * `#/components/schemas/…` resolved; with `strictSchemas`, objects are closed (see above).
 */
export function strictAjv(doc: Json, opts: { strictSchemas: boolean }) {
  const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
  formats.default(ajv);
  ajv.addVocabulary(["example", ...extensionKeys(doc)]);
  const shape = (s: unknown) => {
    const text = JSON.stringify(s).replaceAll('"#/components/schemas/', '"openapi.json#/$defs/');
    const parsed = JSON.parse(text);
    return opts.strictSchemas ? strictify(parsed) : parsed;
  };
  ajv.addSchema({ $id: "openapi.json", $defs: shape(doc.components.schemas) });
  const cache = new Map<string, ValidateFunction>();
  return {
    ajv,
    compile(schema: unknown): ValidateFunction {
      const key = JSON.stringify(schema);
      let v = cache.get(key);
      if (!v) cache.set(key, v = ajv.compile(shape(schema) as object));
      return v;
    },
  };
}

/**
 * A BeforeHook (it runs after auth's) that records which query parameters each route's handler
 * reads, by `METHOD /template`: `Contract.undocumentedReads` then finds those the document lacks.
 */
export function queryReads(reads: Map<string, Set<string>>): BeforeHook {
  return (_req, route, ctx) => {
    const key = `${route.method} ${openApiPath(route.pattern)}`;
    let names = reads.get(key);
    if (!names) reads.set(key, names = new Set());
    const read = names;
    ctx.query = new class extends Query {
      override str(name: string) {
        read.add(name);
        return super.str(name);
      }
      override bool(name: string, def?: boolean) {
        read.add(name);
        return super.bool(name, def);
      }
      override int(name: string, def: number, min: number, max: number) {
        read.add(name);
        return super.int(name, def, min, max);
      }
      override duration(name: string, max: number, min?: number) {
        read.add(name);
        return super.duration(name, max, min);
      }
    }(ctx.query.search);
    return undefined;
  };
}

/** A request as the check needs it: its JSON body, if any. */
export interface Sent {
  json?: unknown;
  /** A body of raw bytes was sent. */
  raw?: boolean;
}

/** The broker's document and the checks against it. */
export class Contract {
  /** Statuses checked, by `METHOD /template`. */
  readonly seen = new Map<string, Set<number>>();
  readonly #compile: (schema: unknown) => ValidateFunction;

  constructor(readonly doc: Json) {
    this.#compile = strictAjv(doc, { strictSchemas: true }).compile;
  }

  /** Reads GET /openapi.json of a running broker. */
  static async load(target: Target): Promise<Contract> {
    const res = await call(target, "GET", "/openapi.json");
    assert(res.status === 200, `GET /openapi.json: ${res.status}`);
    return new Contract(res.body);
  }

  /** The documented path template a concrete path falls under. */
  template(path: string): string | undefined {
    const parts = path.split("/");
    for (const t of Object.keys(this.doc.paths)) {
      const ts = t.split("/");
      if (ts.length === parts.length && ts.every((s, i) => s.startsWith("{") || s === parts[i])) {
        return t;
      }
    }
    return undefined;
  }

  #validate(schema: unknown, value: unknown, what: string): void {
    const v = this.#compile(schema);
    if (!v(value)) {
      const errors = JSON.stringify(v.errors, null, 1).slice(0, 2000);
      throw new Error(
        `${what} does not match the document:\n${errors}\nvalue: ${
          JSON.stringify(value)?.slice(0, 1000)
        }`,
      );
    }
  }

  #checkAnswer(response: Json, res: Res, what: string, head = false): void {
    for (const name of Object.keys(response.headers ?? {})) {
      assert(res.headers.has(name), `${what}: header ${name} is documented but missing`);
    }
    const content = response.content as Record<string, Json> | undefined;
    if (head) return; // a HEAD answer has the headers of a body it does not send
    if (!content) {
      assert(res.text === "", `${what}: no body is documented, got ${res.text.slice(0, 200)}`);
      return;
    }
    const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim();
    const media = content[type] ?? content["*/*"];
    assert(media, `${what}: Content-Type ${type} is not documented (${Object.keys(content)})`);
    if (media.schema && /[/+]json$/.test(type)) {
      this.#validate(media.schema, res.body, `${what}: the body`);
    }
  }

  #checkRequest(op: Json, url: URL, sent: Sent, what: string): void {
    const params = (op.parameters ?? []) as Json[];
    const keyInQuery = (op.security ?? []).some((s: Json) => "apiKeyQuery" in s);
    for (const [name, value] of url.searchParams) {
      if (name === "api_key" && keyInQuery) continue;
      const p = params.find((p) => p.in === "query" && p.name === name);
      assert(p, `${what}: query parameter "${name}" is not documented`);
      const type = p.schema?.type;
      const typed = type === "integer" && /^-?\d+$/.test(value)
        ? Number(value)
        : type === "boolean" && /^(true|false|1|0)$/.test(value)
        ? value === "true" || value === "1"
        : value;
      this.#validate(p.schema, typed, `${what}: query parameter "${name}"`);
    }
    for (const p of params) {
      if (p.in === "query" && p.required) {
        assert(url.searchParams.has(p.name), `${what}: required "${p.name}" not sent`);
      }
    }
    const body = op.requestBody?.content?.["application/json"];
    if (sent.json !== undefined) {
      assert(body, `${what}: a JSON body was sent but none is documented`);
      this.#validate(body.schema, sent.json, `${what}: the request body`);
    } else if (sent.raw) {
      assert(op.requestBody, `${what}: a body was sent but none is documented`);
    } else if (op.requestBody) {
      assert(!op.requestBody.required, `${what}: the documented body is required`);
    }
  }

  /**
   * Checks one exchange against the document: `path` with its query, as sent. Answers of
   * paths no route has, or of methods a path lacks, check against the shared 404 and 405.
   */
  check(method: string, path: string, res: Res, sent: Sent = {}): void {
    const url = new URL(path, "http://broker");
    const template = this.template(url.pathname);
    const what = `${method} ${path} → ${res.status}`;
    const item = template ? this.doc.paths[template] : undefined;
    const op = item?.[method.toLowerCase()];
    if (!op) {
      const shared = res.status === 503
        ? this.doc.components.responses.Unavailable
        : item
        ? this.doc.components.responses.MethodNotAllowed
        : this.doc.components.responses.NoRoute;
      assert(shared, `${what}: no operation ${method} ${template ?? url.pathname}`);
      this.#checkAnswer(shared, res, what, method === "HEAD");
      return;
    }
    const s = String(res.status);
    const response = op.responses[s] ?? op.responses[`${s[0]}XX`] ?? op.responses.default;
    assert(response, `${what}: status ${s} is not documented for ${method} ${template}`);
    this.#checkAnswer(response, res, what, method === "HEAD");
    if (res.status < 300) this.#checkRequest(op, url, sent, what);
    this.record(method, template!, res.status);
  }

  /** Notes an operation as exercised (for exchanges `check` cannot see, like an upgrade). */
  record(method: string, template: string, status: number): void {
    const key = `${method} ${template}`;
    let statuses = this.seen.get(key);
    if (!statuses) this.seen.set(key, statuses = new Set());
    statuses.add(status);
  }

  /** Sends a request and checks its answer. */
  async call(
    target: Target,
    method: string,
    path: string,
    init: { json?: unknown; body?: BodyInit; headers?: Record<string, string> } = {},
  ): Promise<Res> {
    const res = await call(target, method, path, init);
    this.check(method, path, res, { json: init.json, raw: init.body !== undefined });
    return res;
  }

  /** Checks the events of an SSE body against the stream's documented event schema. */
  checkEvents(text: string): number {
    const media = this.doc.paths["/stream/{topic}"].get.responses["200"].content;
    const schema = media["text/event-stream"]["x-ferry-event"];
    let n = 0;
    for (const block of text.split("\n\n")) {
      const e: Record<string, unknown> = {};
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const i = line.indexOf(": ");
        const [field, value] = [line.slice(0, i), line.slice(i + 2)];
        e[field] = field === "data" ? JSON.parse(value) : value;
      }
      if (Object.keys(e).length === 0) continue;
      this.#validate(schema, e, `SSE event ${JSON.stringify(e).slice(0, 200)}`);
      n++;
    }
    return n;
  }

  /** Checks one WebSocket frame, as sent by the client or the server. */
  checkFrame(side: "client" | "server", frame: unknown): void {
    const schema = this.doc.paths["/ws"].get["x-ferry-websocket"][side];
    this.#validate(schema, frame, `a ${side} frame`);
  }

  /** Checks the headers of a webhook POST against the `webhooks` section. */
  checkWebhook(headers: Headers): void {
    for (const p of this.doc.webhooks.message.post.parameters as Json[]) {
      const value = headers.get(p.name);
      if (value === null) {
        assert(!p.required, `webhook POST: header ${p.name} is documented but missing`);
        continue;
      }
      this.#validate(p.schema, value, `webhook POST: header ${p.name}`);
    }
  }

  /** `METHOD /template: name` for each query parameter a handler read that its operation lacks. */
  undocumentedReads(reads: Map<string, Set<string>>): string[] {
    const out: string[] = [];
    for (const [key, names] of reads) {
      const [method, template] = key.split(" ") as [string, string];
      const op = this.doc.paths[template]?.[method.toLowerCase()];
      const documented = new Set(
        ((op?.parameters ?? []) as Json[]).filter((p) => p.in === "query").map((p) => p.name),
      );
      for (const name of names) if (!documented.has(name)) out.push(`${key}: ${name}`);
    }
    return out.sort();
  }

  /** Operations of the document no check has reached. */
  unexercised(): string[] {
    const out: string[] = [];
    for (const [path, item] of Object.entries<Json>(this.doc.paths)) {
      for (const m of METHODS) {
        if (item[m] && !this.seen.has(`${m.toUpperCase()} ${path}`)) {
          out.push(`${m.toUpperCase()} ${path}`);
        }
      }
    }
    return out;
  }
}
