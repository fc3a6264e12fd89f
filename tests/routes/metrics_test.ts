/**
 * GET /metrics: the contract's names and values, label hygiene, `promtool check metrics` on the
 * real output, and a real Prometheus server scraping the broker with a bearer token.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { spawnBroker } from "../_support/child.ts";
import { call } from "../_support/http.ts";
import { parseMetrics, type Sample, valueOf } from "../_support/metrics.ts";
import { busyState, startBroker, withBroker } from "../_support/server.ts";

const PROMETHEUS = "/usr/bin/prometheus";

async function runs(cmd: string, args: string[]): Promise<boolean> {
  try {
    return (await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output()).success;
  } catch {
    return false;
  }
}
const prometheusRuns = await runs(PROMETHEUS, ["--version"]);

async function scrape(base: string, headers: Record<string, string> = {}): Promise<Sample[]> {
  const res = await call(base, "GET", "/metrics", { headers });
  assertEquals(res.status, 200, res.text);
  assertEquals(
    res.headers.get("content-type"),
    "text/plain; version=0.0.4; charset=utf-8",
  );
  return parseMetrics(res.text);
}

Deno.test("GET /metrics reports the message counters and queue gauges per topic and group", async () => {
  await withBroker({}, async (ctx) => {
    await busyState(ctx);
    const s = await scrape(ctx.url);
    const v = (name: string, labels: Record<string, string>) => valueOf(s, name, labels);
    assertEquals(v("ferry_messages_published_total", { topic: "orders" }), 6);
    assertEquals(v("ferry_messages_delivered_total", { topic: "orders" }), 3);
    assertEquals(v("ferry_messages_acked_total", { topic: "orders" }), 1);
    assertEquals(v("ferry_messages_requeued_total", { topic: "jobs" }), 3);
    assertEquals(v("ferry_messages_dead_lettered_total", { topic: "jobs" }), 1);
    assertEquals(v("ferry_messages_published_total", { topic: "jobs.dlq" }), 0);
    assertEquals(v("ferry_messages_expired_total", { topic: "temp" }), 1);
    assertEquals(v("ferry_queue_depth", { topic: "orders" }), 3);
    assertEquals(v("ferry_queue_depth", { topic: "jobs.dlq" }), 1);
    assertEquals(v("ferry_queue_depth", { topic: "temp" }), 1);
    assertEquals(v("ferry_queue_in_flight", { topic: "orders", group: "" }), 1);
    assertEquals(v("ferry_queue_in_flight", { topic: "orders", group: "billing" }), 1);
    assertEquals(v("ferry_stream_subscribers", { topic: "orders" }), 0);
    assertEquals(
      v("ferry_oldest_message_age_seconds", { topic: "orders", group: "billing" }),
      2,
    );
    assertEquals(v("ferry_oldest_message_age_seconds", { topic: "jobs", group: "" }), 0);
  });
});

Deno.test("GET /metrics counts HTTP requests by route pattern and code, never by raw path", async () => {
  const b = await startBroker({});
  try {
    await call(b.url, "POST", "/publish/unique-topic-81f3", { body: "x" });
    await call(b.url, "POST", "/publish/unique-topic-81f3", { body: "" });
    await call(b.url, "GET", "/no/such/path-5d2a");
    await call(b.url, "DELETE", "/healthz");
    const text = (await call(b.url, "GET", "/metrics")).text;
    const s = parseMetrics(text);
    const req = (route: string, code: string) =>
      valueOf(s, "ferry_http_requests_total", { route, code });
    assertEquals(req("/publish/:topic", "201"), 1);
    assertEquals(req("/publish/:topic", "400"), 1);
    assertEquals(req("unmatched", "404"), 1);
    assertEquals(req("unmatched", "405"), 1);
    const routes = new Set(s.filter((x) => x.labels.route).map((x) => x.labels.route));
    assertEquals([...routes].sort(), ["/publish/:topic", "unmatched"]);
    assert(!text.includes("path-5d2a"));
    const count = (route: string) =>
      valueOf(s, "ferry_http_request_duration_seconds_count", { route });
    assertEquals(count("/publish/:topic"), 2);
    const inf = valueOf(s, "ferry_http_request_duration_seconds_bucket", {
      route: "/publish/:topic",
      le: "+Inf",
    });
    assertEquals(inf, 2);
    assert(valueOf(s, "ferry_wal_fsync_seconds_count")! >= 1, "publishes fsync the WAL");
    assert(valueOf(s, "process_cpu_seconds_total")! > 0, "process metrics are there");
    const help = text.split("\n").filter((l) => l.startsWith("# TYPE ferry_")).map((l) =>
      l.split(" ")[2]
    );
    for (
      const name of [
        "ferry_messages_published_total",
        "ferry_messages_delivered_total",
        "ferry_messages_acked_total",
        "ferry_messages_requeued_total",
        "ferry_messages_dead_lettered_total",
        "ferry_messages_expired_total",
        "ferry_queue_depth",
        "ferry_queue_in_flight",
        "ferry_oldest_message_age_seconds",
        "ferry_webhook_deliveries_total",
        "ferry_stream_subscribers",
        "ferry_http_requests_total",
        "ferry_http_request_duration_seconds",
        "ferry_wal_fsync_seconds",
      ]
    ) assert(help.includes(name), `${name} missing`);
  } finally {
    await b.close();
  }
});

Deno.test("GET /metrics output passes promtool check metrics", async () => {
  await withBroker({}, async (ctx) => {
    await busyState(ctx);
    await ctx.call("GET", "/nope");
    const text = (await ctx.call("GET", "/metrics")).text;
    const child = new Deno.Command("promtool", {
      args: ["check", "metrics"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(text));
    await w.close();
    const out = await child.output();
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, `promtool: ${said}`);
  });
});

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test({
  name:
    "a real Prometheus scrapes /metrics with a metrics-scoped bearer token and sees the published count",
  ignore: !prometheusRuns,
  async fn() {
    const key = "scraper-key-4411";
    const b = await startBroker({ apiKeys: `${key}:metrics,pub-key:publish` }); // no admin needed
    const dir = await Deno.makeTempDir({ prefix: "ferry-prom-" });
    const port = freePort();
    await Deno.writeTextFile(
      `${dir}/prometheus.yml`,
      [
        "global: { scrape_interval: 1s, evaluation_interval: 1s }",
        "scrape_configs:",
        "  - job_name: ferry",
        "    scrape_interval: 1s",
        "    scrape_timeout: 1s",
        "    authorization: { type: Bearer, credentials: " + key + " }",
        `    static_configs: [{ targets: ["${new URL(b.url).host}"] }]`,
        "",
      ].join("\n"),
    );
    const prom = new Deno.Command(PROMETHEUS, {
      args: [
        `--config.file=${dir}/prometheus.yml`,
        `--storage.tsdb.path=${dir}/data`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    try {
      const h = { headers: { authorization: "Bearer pub-key" } };
      for (let i = 0; i < 7; i++) {
        await call(b.url, "POST", "/publish/scraped", { ...h, body: "x" });
      }
      const q = encodeURIComponent('ferry_messages_published_total{topic="scraped",job="ferry"}');
      let value: string | undefined;
      for (let i = 0; i < 100 && value !== "7"; i++) {
        await new Promise((r) => setTimeout(r, 200));
        try {
          const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${q}`);
          const body = await res.json();
          value = body?.data?.result?.[0]?.value?.[1];
        } catch { /* not up yet */ }
      }
      assertEquals(
        value,
        "7",
        "Prometheus did not see ferry_messages_published_total = 7 in 20 s",
      );
      const up = await (await fetch(
        `http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent('up{job="ferry"}')}`,
      )).json();
      assertEquals(up.data.result[0].value[1], "1");
    } finally {
      prom.kill("SIGTERM");
      const out = await prom.output();
      await b.close();
      await Deno.remove(dir, { recursive: true });
      if (!out.success && out.signal !== "SIGTERM") {
        console.error(new TextDecoder().decode(out.stderr));
      }
    }
  },
});

Deno.test("GET /metrics reports resident memory under the start task's permissions", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-metrics-" });
  const child = await spawnBroker({ dataDir });
  try {
    const { text } = await call(child, "GET", "/metrics");
    const rss = valueOf(parseMetrics(text), "process_resident_memory_bytes")!;
    assert(rss > 10 * 1024 * 1024, `RSS ${rss} from Deno.memoryUsage(), not /proc`);
  } finally {
    child.kill("SIGKILL");
    await child.exited;
    await Deno.remove(dataDir, { recursive: true });
  }
});
