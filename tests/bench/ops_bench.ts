/**
 * What the operations hooks add to a request: the publish handler with and without the API-key
 * and metrics hooks, and with a query string (checked, then read); and the two per-request costs
 * next to the alternatives they replaced (SHA-256 + timingSafeEqual; prom-client's own
 * observe/inc).
 * `deno bench -A tests/bench/ops_bench.ts`
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { Counter, Histogram, Registry } from "prom-client";
import { KeyRing, parseKeyList } from "../../lib/auth.ts";
import { RateLimiter } from "../../lib/rate_limit.ts";
import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { HTTP_BUCKETS_S, Metrics } from "../../routes/metrics.ts";
import { silentLogger } from "../../lib/log.ts";
import { acceptsOf, checkQuery } from "../../routes/accepts.ts";
import { createHandler } from "../../routes/app.ts";
import { Query } from "../../routes/http.ts";
import { publishRoutes } from "../../routes/publish.ts";
import { OpenStreams } from "../../lib/open_streams.ts";
import { appOptions, type Runtime } from "../../runtime.ts";

const KEY = "bench-key-0123456789abcdef";
const body = new Uint8Array(1024).fill(120);
const config = defaultConfig({ dataDir: ":memory:", apiKeys: KEY });

async function handler(hooks: boolean) {
  const broker = await Broker.open(config, { tick: false });
  await broker.createTopic("bench", { policy: "drop-oldest", maxMessages: 10_000 });
  if (!hooks) return createHandler(broker);
  const rt: Runtime = {
    broker,
    metrics: new Metrics().attach(broker),
    keys: new KeyRing(parseKeyList(KEY)),
    limiter: new RateLimiter(),
    streams: new OpenStreams(),
    tls: undefined,
  };
  return createHandler(broker, appOptions(config, silentLogger, rt));
}
const plain = await handler(false);
const hooked = await handler(true);
const request = (query = "") =>
  new Request(`http://ferry/publish/bench${query}`, {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/octet-stream" },
  });

Deno.bench("publish 1KiB memory, no hooks", { group: "handler", baseline: true }, async () => {
  const res = await plain(request());
  if (res.status !== 201) throw new Error(String(res.status));
});
Deno.bench("publish 1KiB memory, auth + metrics hooks", { group: "handler" }, async () => {
  const res = await hooked(request());
  if (res.status !== 201) throw new Error(String(res.status));
});
// The query is checked against the route's accepted names (routes/accepts.ts) before it is read.
Deno.bench(
  "publish 1KiB memory, no hooks, ?ttl=1h&priority=high",
  { group: "handler" },
  async () => {
    const res = await plain(request("?ttl=1h&priority=high"));
    if (res.status !== 201) throw new Error(String(res.status));
  },
);

// What the unknown-parameter check adds to a query the handler reads anyway.
const PUBLISH_ACCEPTS = acceptsOf(publishRoutes[0]!, false);
const readPublishQuery = (q: Query) => [q.duration("ttl", 1e9), q.str("priority"), q.bool("x")];
Deno.bench("read ?ttl=1h&priority=high", { group: "query", baseline: true }, () => {
  readPublishQuery(new Query("ttl=1h&priority=high"));
});
Deno.bench("check, then read ?ttl=1h&priority=high", { group: "query" }, () => {
  const q = new Query("ttl=1h&priority=high");
  checkQuery(q, PUBLISH_ACCEPTS);
  readPublishQuery(q);
});

const ring1 = new KeyRing(parseKeyList(KEY));
const ring10 = new KeyRing(
  parseKeyList(
    Array.from({ length: 9 }, (_, i) => `other-key-${i}-0123456789ab`).join(",") + `,${KEY}`,
  ),
);
const digest = createHash("sha256").update(KEY).digest();
Deno.bench("KeyRing.scopesOf, 1 key", { group: "key check", baseline: true }, () => {
  if (!ring1.scopesOf(KEY)) throw new Error();
});
Deno.bench("KeyRing.scopesOf, 10 keys", { group: "key check" }, () => {
  if (!ring10.scopesOf(KEY)) throw new Error();
});
Deno.bench("sha256 + timingSafeEqual, 1 key", { group: "key check" }, () => {
  if (!timingSafeEqual(createHash("sha256").update(KEY).digest(), digest)) throw new Error();
});

const metrics = new Metrics({ process: false });
const registry = new Registry();
const counter = new Counter({
  name: "c_total",
  help: "c",
  labelNames: ["route", "code"],
  registers: [registry],
});
const histogram = new Histogram({
  name: "h",
  help: "h",
  labelNames: ["route"],
  buckets: HTTP_BUCKETS_S,
  registers: [registry],
});
Deno.bench("Metrics.recordRequest", { group: "request metrics", baseline: true }, () => {
  metrics.recordRequest("/publish/:topic", 201, 0.00013);
});
Deno.bench("prom-client inc + observe", { group: "request metrics" }, () => {
  counter.inc({ route: "/publish/:topic", code: "201" });
  histogram.observe({ route: "/publish/:topic" }, 0.00013);
});
