/**
 * Helpers of the operations tests: a plausible request for any route of the table, a parser of
 * Prometheus text, and polling a child broker's log.
 */

import type { Route } from "../../routes/router.ts";
import type { CallInit, Ctx as RoutesCtx } from "../routes/_http.ts";

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
export function pathOf(route: Route): string {
  const path = route.pattern.replace(/:(\w+)/g, (_, name: string) => PARAMS[name] ?? "x1");
  return `${path}?queue=t1&topic=t1`;
}

/** Sends a plausible request for a route; reads only the status (a stream's body is dropped). */
export async function callRoute(
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

/** One sample of Prometheus text: name, labels, value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (the subset prom-client writes). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c);
    }
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one sample with this name and (at least) these labels; undefined if none. */
export function valueOf(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = samples.filter((s) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  if (found.length > 1) {
    throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length}`);
  }
  return found[0]?.value;
}

/** Waits (bounded) until a child's log has a line with `msg` (and `fields`); returns it. */
export async function waitForLog(
  logs: string[],
  msg: string,
  fields: Record<string, unknown> = {},
  from = 0,
  timeoutMs = 10_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const line of logs.slice(from)) {
      try {
        const rec = JSON.parse(line);
        if (rec.msg === msg && Object.entries(fields).every(([k, v]) => rec[k] === v)) return rec;
      } catch { /* not JSON */ }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(
    `no log line "${msg}" ${JSON.stringify(fields)} within ${timeoutMs} ms:\n${logs.join("\n")}`,
  );
}

/**
 * Builds a broker state that exercises every figure: "orders" (a named group, in-flight, acked
 * and delayed messages), "jobs" with one message dead-lettered into "jobs.dlq", and "temp" with
 * one message expired by its TTL.
 */
export async function busyState(ctx: RoutesCtx): Promise<void> {
  const ok = async (method: string, path: string, init: CallInit = {}) => {
    const res = await ctx.call(method, path, init);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  await ok("POST", "/api/groups", { json: { topic: "orders", group: "billing" } });
  for (let i = 0; i < 5; i++) await ok("POST", "/publish/orders", { body: `o${i}` });
  await ok("POST", "/publish/orders?delay=1m", { body: "later" });
  const [first] = await ok("GET", "/consume/orders?limit=2");
  await ok("POST", `/ack/orders/${first.id}`);
  await ok("GET", "/consume/orders?group=billing");

  await ok("POST", "/publish/jobs", { body: "j" });
  for (let i = 0; i < 3; i++) {
    const m = await ok("GET", "/consume/jobs");
    await ok("POST", "/requeue", { json: m });
  }
  await ok("POST", "/publish/temp?ttl=1s", { body: "t" });
  await ok("POST", "/publish/temp", { body: "stays" });
  await ctx.tick(2_000);
}
