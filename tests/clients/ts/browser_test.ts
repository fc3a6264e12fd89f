/**
 * The browser bundle in headless Chromium (Debian's, driven by playwright-core): a page on the
 * broker's own origin (a real broker answer; playwright serves only the bundle's path, and every
 * other request reaches the real broker) publishes, consumes and acks over fetch, runs a
 * `messages()` loop, subscribes over a WebSocket as a spy and as a consumer, and reads an event
 * stream.
 */

import { chromium } from "playwright-core";
import { assert, assertEquals } from "../../_support/assert.ts";
import { CHROMIUM, CHROMIUM_ARGS } from "../../_support/browser.ts";
import { startBroker } from "../../_support/server.ts";
import { eventually } from "../../_support/wait.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;

/** Where the page loads the bundle from, on the broker's origin (playwright answers it). */
const BUNDLE_PATH = "/__client_test/ferry.browser.js";

/** The page's module script: it reports through `window.result` or `window.failure`. */
const SCRIPT = `
import { Ferry, FerryError, payloadJson } from "${BUNDLE_PATH}";
const ferry = new Ferry({ url: location.origin, apiKey: "browser-key" });
const result = globalThis.partial = {};
try {
  const p = await ferry.publish("from-browser", { hello: "chromium" });
  const [m] = await ferry.consume("from-browser");
  await ferry.ack("from-browser", m.id);
  result.roundTrip = { same: m.id === p.id, payload: payloadJson(m) };
  result.afterAck = (await ferry.consume("from-browser")).length;
  result.error = await ferry.consume("bad name!").catch((e) => [e instanceof FerryError, e.code]);

  const batch = await ferry.publishBatch("batch", ["text", new Uint8Array([0, 255, 7])]);
  const taken = await ferry.consume("batch", { limit: 2, autoAck: true });
  result.batch = [batch.map((p) => p.id).join() === taken.map((m) => m.id).join(),
    taken.map((m) => m.payload)];
  for (const t of ["a", "b"]) await ferry.publish("loop", t);
  const ac = new AbortController();
  result.looped = [];
  for await (const msg of ferry.messages("loop", { batch: 2, signal: ac.signal })) {
    result.looped.push(msg.payload_text);
    if (result.looped.length === 2) ac.abort();
  }

  const heard = [];
  let heardAll;
  const all = new Promise((r) => heardAll = r);
  const note = (kind) => (msg) => {
    heard.push(kind + ":" + msg.payload_text);
    if (heard.length === 2) heardAll();
  };
  await ferry.createTopic("ws.jobs"); // the gauge below lists existing topics
  const streamed = (async () => {
    for await (const msg of ferry.stream("ws.jobs")) return msg.payload_text;
  })();
  const connected = 'ferry_stream_subscribers{topic="ws.jobs"} 1';
  for (let i = 0; i < 500 && !(await ferry.metrics()).includes(connected); i++);
  const sub = ferry.subscribe("ws.*", note("spy"));
  sub.subscribe("ws.jobs", note("job"), { group: "browser", prefetch: 1 });
  await sub.ready;
  await ferry.publish("ws.jobs", "over the socket");
  await all;
  result.socket = heard.sort();
  result.streamed = await streamed;
  await sub.close();
  window.result = result;
} catch (e) {
  window.failure = String(e && e.stack || e);
}
`;

Deno.test({
  name: "the browser bundle in Chromium: fetch calls, messages(), WebSocket subscribe and stream",
  // playwright-core keeps its own pipes and timers in the test process
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "ferry-browser-" });
    const broker = await startBroker({ apiKeys: "browser-key" });
    let context: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
    try {
      const build = await new Deno.Command(Deno.execPath(), {
        args: ["task", "build:client", "--out", `${dir}/pkg`],
        cwd: ROOT,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert(build.success, new TextDecoder().decode(build.stderr));
      const bundle = await Deno.readTextFile(`${dir}/pkg/ferry.browser.js`);

      context = await chromium.launchPersistentContext(`${dir}/profile`, {
        executablePath: CHROMIUM,
        headless: true,
        args: CHROMIUM_ARGS,
      });
      const page = context.pages()[0] ?? await context.newPage();
      const console: string[] = [];
      page.on("console", (m) => console.push(`${m.type()}: ${m.text()}`));
      // The page is a real answer of the broker (its /healthz), so it runs in the broker's
      // origin and address space; only the bundle, a subresource, comes from playwright.
      await page.route(
        `${broker.url}${BUNDLE_PATH}`,
        (route) => route.fulfill({ body: bundle, contentType: "text/javascript" }),
      );
      await page.goto(`${broker.url}/healthz`);
      await page.addScriptTag({ type: "module", content: SCRIPT });
      await page.waitForFunction(
        () => "result" in globalThis || "failure" in globalThis,
        undefined,
        { timeout: 30_000 },
      ).catch(async (e) => {
        const partial = await page.evaluate(() =>
          JSON.stringify((globalThis as { partial?: unknown }).partial)
        );
        throw new Error(`${e.message}\nso far: ${partial}\n${console.join("\n")}`);
      });
      const failure = await page.evaluate(() => (globalThis as { failure?: string }).failure);
      assertEquals(failure, undefined, `the page failed:\n${failure}\n${console.join("\n")}`);
      const result = await page.evaluate(() => (globalThis as { result?: unknown }).result);
      assertEquals(result, {
        roundTrip: { same: true, payload: { hello: "chromium" } },
        afterAck: 0,
        error: [true, "invalid_name"],
        batch: [true, ["dGV4dA==", "AP8H"]],
        looped: ["a", "b"],
        socket: ["job:over the socket", "spy:over the socket"],
        streamed: "over the socket",
      });
      const acked = async () => {
        const s = await (await fetch(`${broker.url}/api/stats`, {
          headers: { "x-api-key": "browser-key" },
        })).json();
        return s.topics.loop.in_flight + s.topics["ws.jobs"].groups.browser.in_flight === 0;
      };
      await eventually(acked, 5_000, "everything the page consumed acked");
    } finally {
      await context?.close();
      await broker.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
