/**
 * The HTTP fuzzer's request generator: seeded, it walks every route of `ROUTES` (so a route added
 * later is fuzzed too) with every kind of method, path parameter, query parameter, header and
 * body, good and bad, and mixes in valid scenarios (fuzz_scenarios.ts) that reach deeper states.
 * POST /api/drain is never generated: a drained broker answers 503 to everything after it.
 * What each route takes is in fuzz_routes.ts; the campaign that sends and judges is in
 * fuzz_campaign.ts.
 */

import type { Route } from "../../routes/router.ts";
import {
  authHeaders,
  badJsonBody,
  type HeaderList,
  HOSTS,
  idsJson,
  type Keys,
  METHODS,
  mqHeaders,
  oddHeader,
  payload,
} from "./inputs.ts";
import {
  bool,
  BROKEN_ESCAPES,
  type Bytes,
  duration,
  GROUPS,
  id,
  integer,
  jsonJunk,
  lease,
  name,
  Rand,
  TOPICS,
} from "./values.ts";
import { FUZZED_ROUTES, isDrain, type Kind, specOf, STRAY_PATHS } from "./routes.ts";

/** One generated request, replayable from its printed form. */
export interface FuzzRequest {
  method: string;
  /** Path and query exactly as generated (fetch may normalize it; the raw sender does not). */
  path: string;
  headers: HeaderList;
  body?: Bytes;
  /** A Host header value: fetch cannot send one, so this forces the raw-socket sender. */
  host?: string;
  /** A Content-Length that lies about the body (forces the raw-socket sender). */
  contentLength?: string;
  /** Send over a raw socket byte for byte even if fetch could send it. */
  raw?: boolean;
  /** Disconnect after this many ms (a long poll left on purpose); no answer is expected. */
  abortMs?: number;
  /** What is notable about this request, for the report. */
  tags: string[];
}

/** Choices a caller can pin when building a request for one route. */
export interface BuildOptions {
  /** Chance that each field holds a bad value (0: every value valid). */
  badness: number;
  /** No random extras: the route's own method, the admin key, no odd headers or framing. */
  plain?: boolean;
  /** This query parameter with this (already encoded) value. */
  query?: [string, string];
  /** This JSON body field with this JSON text as its value. */
  field?: [string, string];
}

/** Encodes a value for a URL, or (unless `plain`) sometimes inserts it raw, broken escapes too. */
function urlPart(r: Rand, v: string, tags: string[], plain = false): string {
  if (!plain && r.chance(0.1)) return v;
  if (!plain && r.chance(0.05)) {
    tags.push("url:broken-escape");
    return v + r.pick(BROKEN_ESCAPES);
  }
  try {
    return encodeURIComponent(v);
  } catch {
    return v; // a lone surrogate: send it as it is
  }
}

/** Produces fuzz requests from a seed; `learn()` feeds it ids seen in answers. */
export class Generator {
  readonly r: Rand;
  /** Ids of real messages seen in answers (ack, touch and requeue use them). */
  readonly learned: string[] = [];

  constructor(seed: number, readonly keys: Keys, readonly routes: Route[] = FUZZED_ROUTES) {
    this.r = new Rand(seed);
  }

  /** Remembers message ids from an answer body, keeping the last 64. */
  learn(body: unknown): void {
    const items = Array.isArray(body) ? body : [body];
    for (const m of items) {
      const v = (m as { id?: unknown } | null)?.id;
      if (typeof v === "string" && v.length === 36) {
        this.learned.push(v);
        if (this.learned.length > 64) this.learned.shift();
      }
    }
  }

  /** A value of `kind` as text; bad when `bad` is set. */
  value(kind: Kind, bad: boolean): string {
    const r = this.r;
    switch (kind) {
      case "topic":
      case "queue":
        return name(r, TOPICS, bad);
      case "group":
        return name(r, GROUPS, bad);
      case "id":
        return id(r, this.learned, bad);
      case "ids":
        return idsJson(r, this.learned, bad);
      case "duration":
        return duration(r, bad);
      case "lease":
        return lease(r, bad);
      case "timeout":
        return bad ? duration(r, true) : r.pick(["0s", "1ms", "10ms", "100ms"]);
      case "limit":
        return integer(r, 1, 1000, bad);
      case "peekLimit":
        return integer(r, 1, 10, bad);
      case "maxMessages":
        return integer(r, 1, 100, bad);
      case "bool":
        return bool(r, bad);
      case "priority":
        return bad ? r.pick(["HIGH", "urgent", "0", "", "normal "]) : r.pick(["high", "low"]);
      case "policy":
        return bad ? r.pick(["REJECT", "drop_oldest", ""]) : r.pick(["reject", "drop-oldest"]);
      case "idem":
        return bad ? r.pick(["AUTO", "yes", "manual"]) : "auto";
      case "text":
        return bad ? r.pick(["", "x".repeat(5000), "\u0000", "ü", "a.b.c"]) : r.pick(["k", "n.m"]);
    }
  }

  /** A JSON field value as JSON text: a good value, a bad one of the right type, or junk. */
  #field(kind: Kind, bad: boolean): string {
    if (bad && this.r.chance(0.5)) return jsonJunk(this.r);
    const v = this.value(kind, bad);
    if (kind === "ids") return v;
    if (kind === "maxMessages" && /^\d+$/.test(v)) return v;
    return JSON.stringify(v);
  }

  /** The next request of the campaign: any route, any badness (never POST /api/drain). */
  next(): FuzzRequest {
    for (;;) {
      const badness = this.r.pick([0, 0, 0, 0.1, 0.3, 1]);
      const req = this.build(this.r.pick(this.routes), { badness });
      const pathname = req.path.split("?")[0]!;
      if (!isDrain(req.method, pathname) && !pathname.includes("drain")) return req;
    }
  }

  /** A request for `route`, with values bad at the rate `o.badness` and the pins of `o`. */
  build(route: Route, o: BuildOptions): FuzzRequest {
    const r = this.r;
    const bad = () => r.chance(o.badness);
    const extras = o.plain ? 0 : 1;
    const tags: string[] = [];
    const spec = specOf(route);
    let method = route.method;
    if (r.chance(0.12 * extras)) method = r.pick(METHODS);
    else if (method === "GET" && r.chance(0.05 * extras)) method = "HEAD";
    if (method !== route.method) tags.push(`method:${method.slice(0, 12)}`);

    let path = route.pattern.replace(/:(\w+)/g, (_, p: string) => {
      const kind: Kind = p === "id" ? "id" : p === "group" ? "group" : "topic";
      return urlPart(r, this.value(kind, bad()), tags, o.plain);
    });
    if (r.chance(0.03 * extras)) {
      path = r.pick(STRAY_PATHS);
      tags.push("path:stray");
    }

    const query: string[] = [];
    for (const [key, kind] of Object.entries(spec.query ?? {})) {
      if (key === o.query?.[0]) continue;
      if (
        !r.chance(kind === "queue" || kind === "topic" ? (o.plain ? 1 : 0.9) : (o.plain ? 0 : 0.35))
      ) continue;
      const reps = r.chance(0.04 * extras) ? 2 + r.int(3) : 1;
      if (reps > 1) tags.push(`query:repeated-${key}`);
      for (let i = 0; i < reps; i++) {
        query.push(`${key}=${urlPart(r, this.value(kind, bad()), tags, o.plain)}`);
      }
    }
    if (o.query) query.push(`${o.query[0]}=${o.query[1]}`);
    if (r.chance(0.03 * extras)) query.push(r.pick(["=x", "&&", "unknown=1", "a", "%zz=1", "x=%"]));
    if (query.length) path += `?${query.join("&")}`;

    const auth = authHeaders(r, this.keys, o.plain);
    const headers: HeaderList = [...auth.headers];
    if (auth.tag) tags.push(auth.tag);
    const extra = !extras
      ? null
      : spec.payload && r.chance(0.3)
      ? mqHeaders(r)
      : r.chance(0.1)
      ? oddHeader(r)
      : null;
    if (extra) {
      headers.push(...extra.headers);
      tags.push(extra.tag);
    }
    if (spec.payload && r.chance(0.2 * extras)) {
      headers.push(["idempotency-key", `k-${r.int(20)}`]);
      if (r.chance(0.5)) path += `${path.includes("?") ? "&" : "?"}idempotency=auto`;
    }

    let body: Bytes | undefined;
    if (spec.payload) {
      const p = payload(r);
      body = p.body;
      if (p.tag) tags.push(p.tag);
    } else if (spec.json && (o.field || r.chance(1 - o.badness * 0.3))) {
      const fields = Object.entries(spec.json).filter(([k]) =>
        k !== o.field?.[0] && (o.plain || r.chance(0.85))
      );
      const parts = fields.map(([k, kind]) => `${JSON.stringify(k)}:${this.#field(kind, bad())}`);
      if (o.field) parts.push(`${JSON.stringify(o.field[0])}:${o.field[1]}`);
      body = new TextEncoder().encode(`{${parts.join(",")}}`);
    } else if (spec.json || r.chance(0.05 * extras)) {
      const b = badJsonBody(r);
      body = b.body;
      tags.push(b.tag);
    }
    if (body && !spec.json && !spec.payload) tags.push("body:unexpected");

    const req: FuzzRequest = { method, path, headers, body, tags };
    if (r.chance(0.03 * extras)) {
      req.host = r.pick(HOSTS);
      tags.push(`host:${req.host.slice(0, 16)}`);
    }
    if (body && r.chance(0.015 * extras)) {
      req.contentLength = String(body.length + r.pick([-1, 1, 100]));
      tags.push("content-length:lie");
    }
    if (route.pattern === "/consume/:topic" && r.chance(0.01 * extras)) {
      Object.assign(req, { method: "GET", path: "/consume/fz-idle?timeout=30s", abortMs: 100 });
      tags.push("long-poll:abandoned");
    }
    if (r.chance(0.04 * extras)) req.raw = true;
    return req;
  }
}
