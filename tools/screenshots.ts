/**
 * Saves the dashboard screenshots of README.md and docs/dashboard.md: `deno task screenshots [--out docs] [--serve]`.
 * Starts a broker in this process on an in-memory data dir and a hand-driven clock, plays five
 * minutes of traffic into it (so the rate charts have history), then photographs the overview
 * and a queue view in Chromium at 1440 px. `--serve` keeps the broker running afterwards, with
 * its URL printed, to look at the same data by hand.
 */

import { parseArgs } from "node:util";
import { Clock, startBroker } from "../tests/_support/server.ts";
import { closePage, openPage } from "../tests/_support/browser.ts";
import { call } from "../tests/_support/http.ts";
import { prng } from "../tests/_support/prng.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { out: { type: "string", default: "docs" }, serve: { type: "boolean" } },
});
const OUT = values.out!;

/** Steps of 5 s played before the photos: the 5 minutes the broker keeps rates for. */
const STEPS = 60;

const clock = new Clock();
clock.now = Date.now() - STEPS * 5_000;
const b = await startBroker({ dataDir: ":memory:", maxTopics: 100 }, { clock: clock.fn });
const rand = prng(7);

async function ok(method: string, path: string, init: Parameters<typeof call>[3] = {}) {
  const res = await call(b.url, method, path, init);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

/** A plausible payload for each topic. */
function payload(topic: string, i: number): BodyInit {
  switch (topic) {
    case "orders":
      return JSON.stringify({
        order: `o-${10400 + i}`,
        sku: ["a1", "b7", "c3"][i % 3],
        qty: 1 + (i % 4),
        total_eur: 19.9 + (i % 7) * 5,
      });
    case "payments":
      return JSON.stringify({
        payment: `p-${8800 + i}`,
        order: `o-${10400 + i}`,
        status: "captured",
      });
    case "emails.outbound":
      return JSON.stringify({ to: `user${i}@example.com`, template: "receipt" });
    case "thumbnails":
      return Uint8Array.from({ length: 48 }, (_, k) => (k * 37 + i) & 0xff);
    default:
      return `line ${i} from ${topic}`;
  }
}

try {
  await ok("POST", "/api/topics", { json: { name: "orders", retain: "24h", visibility: "45s" } });
  await ok("POST", "/api/topics", { json: { name: "audit.log", policy: "drop-oldest" } });
  await ok("POST", "/api/groups", { json: { topic: "orders", group: "billing" } });
  await ok("POST", "/api/groups", { json: { topic: "orders", group: "shipping" } });
  await ok("POST", "/api/groups", { json: { topic: "payments", group: "fraud-check" } });

  // Per-second rates of each topic: a base, a slow wave, some noise; consumers keep up or not.
  const TOPICS: [string, number, number][] = [
    ["orders", 9, 0.85],
    ["payments", 5, 1],
    ["emails.outbound", 3, 0.6],
    ["thumbnails", 2, 1],
    ["audit.log", 4, 0],
  ];
  let n = 0;
  for (let step = 0; step < STEPS; step++) {
    for (const [topic, base, drain] of TOPICS) {
      const wave = 1 + 0.6 * Math.sin((step + base) / 6);
      const count = Math.max(0, Math.round(base * wave * (0.7 + 0.6 * rand()) * 5 / 5));
      for (let i = 0; i < count; i++) {
        await ok("POST", `/publish/${topic}`, {
          body: payload(topic, n++),
          headers: topic === "orders" ? { "x-mq-trace": `t-${n}`, "x-mq-source": "web" } : {},
        });
      }
      const take = Math.round(count * drain);
      if (take > 0) {
        for (const group of topic === "orders" ? ["", "billing", "shipping"] : [""]) {
          const q = `limit=${take}&auto_ack=true${group ? `&group=${group}` : ""}`;
          await call(b.url, "GET", `/consume/${topic}?${q}`);
        }
      }
    }
    // A flaky consumer: 40 % of its attempts fail, so some messages end in payments.dlq.
    const got = await call(b.url, "GET", "/consume/payments?group=fraud-check&limit=100");
    for (const m of got.status === 200 ? [got.body].flat() : []) {
      if (rand() < 0.4) {
        const reason = rand() < 0.5 ? "fraud service timed out after 10s" : "HTTP 502 from scorer";
        await ok("POST", `/requeue?group=fraud-check&reason=${encodeURIComponent(reason)}`, {
          json: m,
        });
      } else {
        await ok("POST", `/ack/payments/${m.id}?group=fraud-check`);
      }
    }
    b.broker.sweep(clock.advance(5_000));
  }

  // What an operator would look into: messages in flight and delayed.
  await ok("GET", "/consume/orders?limit=3&visibility=10m");
  await ok("POST", "/publish/orders?delay=10m", { body: JSON.stringify({ order: "o-later" }) });
  b.broker.sweep(clock.advance(2_000));

  const s = await openPage({ viewport: { width: 1440, height: 900 } });
  try {
    const { page } = s;
    await page.goto(`${b.url}/dashboard`);
    await page.locator("table.queues tbody tr").nth(4).waitFor();
    await page.getByText("healthy").waitFor();
    await page.screenshot({ path: `${OUT}/dashboard-overview.png`, fullPage: true });

    await page.goto(`${b.url}/dashboard#/queue/orders`);
    await page.locator("#inflight-h").waitFor();
    await page.locator("section[aria-labelledby=inflight-h] tbody tr").first().waitFor();
    await page.locator("#peek-limit").fill("3");
    await page.getByRole("button", { name: "Peek", exact: true }).click();
    await page.locator("article.message").first().waitFor();
    await page.screenshot({ path: `${OUT}/dashboard-queue.png`, fullPage: true });
    if (s.errors.length) throw new Error(`the page logged errors:\n${s.errors.join("\n")}`);
    console.log(`saved ${OUT}/dashboard-overview.png and ${OUT}/dashboard-queue.png`);
  } finally {
    await closePage(s);
  }
  if (values.serve) {
    console.log(`serving ${b.url}/dashboard; Ctrl-C ends`);
    await new Promise(() => {});
  }
} finally {
  await b.close();
}
