/**
 * @module Which worker answers a request when the broker runs several (BROKER_WORKERS,
 * docs/architecture.md "Workers"). Every worker listens on the port and takes whatever
 * connections the kernel gives it; a request for a topic another worker owns is handed to that
 * worker, body and all, and its answer comes back the same way (net/worker_link.ts). A request
 * that spans topics (`/api/queues`, `/metrics`, …) is answered by every worker and merged by its
 * route's `shard.all`. A request that names a topic this worker owns runs here with no copy.
 */

import { shardOf } from "../lib/api.ts";
import { MAX_BATCH_BODY_BYTES } from "../lib/config.ts";
import { readBody } from "./body.ts";
import { BrokerError } from "../lib/errors.ts";
import { problem } from "./http.ts";
import type { Ctx, Route, TopicSource } from "./router.ts";

/** This worker's place among the broker's workers, and how it asks the others. */
export interface Shards {
  self: number;
  count: number;
  /** Asks worker `to` (never `self`) to answer a request; `body` is given away. */
  ask(
    to: number,
    method: string,
    url: string,
    headers: Headers,
    body: Uint8Array | null,
  ): Promise<Response>;
}

/** Largest body any route takes (a batch publish): a bigger one is refused before it crosses. */
const MAX_FORWARDED_BODY_BYTES = MAX_BATCH_BODY_BYTES;

/** Headers that describe one connection or one encoding of the body, not the request. */
const HOP_HEADERS = ["connection", "content-length", "keep-alive", "transfer-encoding", "upgrade"];

/**
 * The request's URL for another worker, which rebuilds the request from it: 400 when it does not
 * parse (a Host header like `@` reads as a URL here but cannot be built again).
 */
function forwardedUrl(req: Request): string {
  const url = req.url;
  if (!URL.canParse(url)) {
    throw new BrokerError("bad_request", "Cannot read the request URL: check the Host header");
  }
  return url;
}

/** The request's headers for another worker. */
function forwardedHeaders(req: Request, requestId: string): Headers {
  const h = new Headers(req.headers);
  for (const name of HOP_HEADERS) h.delete(name);
  h.set("x-request-id", requestId); // the same id in both workers' logs and in the answer
  return h;
}

/** A request with the same method, URL and headers and `body` (read already) as its body. */
function withBody(req: Request, body: Uint8Array): Request {
  return new Request(forwardedUrl(req), {
    method: req.method,
    headers: req.headers,
    body: body.length ? body as Uint8Array<ArrayBuffer> : undefined,
  });
}

/** The topic the request names, by the first of `sources` it has; body fields from `json`. */
function namedTopic(
  sources: TopicSource[],
  ctx: Ctx,
  json: () => Record<string, unknown> | undefined,
): string | undefined {
  for (const source of sources) {
    const [kind, name] = source.split(":") as [string, string];
    const v = kind === "param"
      ? ctx.params[name]
      : kind === "query"
      ? ctx.query.str(name)
      : json()?.[name];
    if (typeof v === "string" && v !== "") return v;
  }
  return undefined;
}

/** The JSON object in `body`, or undefined (the route's own parsing reports what is wrong). */
function parseObject(body: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(body));
    return v && typeof v === "object" && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The header a worker answering a handed-over request names what it acted on with (a webhook's
 * URL, a group): the worker that took the request writes the audit line (routes/audit.ts).
 */
export const SUBJECT_HEADER = "x-ferry-audit-subject";

/** Moves what another worker's answer names into `ctx.subject`; the client never sees it. */
function learnSubject(res: Response, ctx: Ctx): Response {
  const subject = res.headers.get(SUBJECT_HEADER);
  if (subject !== null) {
    ctx.subject = subject;
    res.headers.delete(SUBJECT_HEADER);
  }
  return res;
}

/**
 * Runs a matched route on the worker that should answer it: here, on the owner of its topic, or
 * on every worker (`shard.all`). Errors thrown here (a body too large to hand over) become
 * problem answers in app.ts like any route's.
 */
export async function dispatch(
  shards: Shards,
  route: Route,
  req: Request,
  ctx: Ctx,
): Promise<Response> {
  const rule = route.shard;
  if (!rule) return route.handler(req, ctx);
  const sources = rule.topic ?? [];
  const bodySource = sources.some((s) => s.startsWith("body:"));
  // Path and query name the topic without reading anything: an owned request runs at once.
  let topic = namedTopic(sources.filter((s) => !s.startsWith("body:")), ctx, () => undefined);
  if (topic !== undefined && shardOf(topic, shards.count) === shards.self) {
    return route.handler(req, ctx);
  }
  // Read once, when it must cross or name the topic; the route then reads the copy.
  const read: { body?: Uint8Array } = {};
  const body = async () =>
    read.body ??= req.body ? await readBody(req, MAX_FORWARDED_BODY_BYTES) : new Uint8Array(0);
  if (topic === undefined && bodySource) {
    const json = parseObject(await body());
    topic = namedTopic(sources, ctx, () => json);
    ctx.subject ??= topic; // for the audit line, which this worker writes
  }
  const local = () => route.handler(read.body ? withBody(req, read.body) : req, ctx);
  if (topic !== undefined) {
    const owner = shardOf(topic, shards.count);
    if (owner === shards.self) return local();
    // The broker routes see sends these verbs to the owner (lib/remote_broker.ts).
    if (rule.api) return local();
    const headers = forwardedHeaders(req, ctx.requestId);
    return learnSubject(
      await shards.ask(owner, req.method, forwardedUrl(req), headers, await body()),
      ctx,
    );
  }
  if (!rule.all) return local();
  const headers = forwardedHeaders(req, ctx.requestId);
  const url = forwardedUrl(req);
  const bytes = await body();
  const others: Promise<Response>[] = [];
  for (let i = 0; i < shards.count; i++) {
    if (i !== shards.self) others.push(shards.ask(i, req.method, url, headers, bytes.slice()));
  }
  // A refusal here (the id is another worker's) is one answer among the others.
  const mine = await Promise.resolve().then(local).catch((e: unknown) => {
    if (e instanceof BrokerError) return problem(e, ctx.requestId);
    throw e;
  });
  const answers = (await Promise.all(others)).map((res) => learnSubject(res, ctx));
  return rule.all([mine, ...answers]);
}
