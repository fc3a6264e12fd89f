/**
 * The live tail and the webhooks view in Chromium against a real broker: messages arrive over
 * SSE, pause holds them, the filter hides what does not match; webhooks are added, show their
 * attempts, and are deleted.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { withDashboard } from "../_support/browser.ts";
import { call, publish } from "../_support/http.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";

Deno.test("the live tail shows each message as it is published, with pause and filter", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await open("#/live");
    await page.getByLabel("Topic").fill("events");
    await page.getByRole("button", { name: "Start" }).click();
    await page.locator("h1", { hasText: "Live tail of events" }).waitFor();
    await page.locator(".pill", { hasText: "live" }).waitFor();

    await publish(url, "events", JSON.stringify({ kind: "signup", user: "lovelace" }));
    const events = page.locator("li.event");
    await events.filter({ hasText: "signup" }).waitFor();

    // Paused: new messages are held, counted, and shown on resume, newest first.
    await page.getByRole("button", { name: "Pause" }).click();
    await publish(url, "events", JSON.stringify({ kind: "login", user: "bob" }));
    await page.getByText("1 held while paused").waitFor();
    assertEquals(await events.count(), 1);
    await page.getByRole("button", { name: "Resume" }).click();
    await events.filter({ hasText: "login" }).waitFor();
    assert((await events.first().textContent())!.includes("login"));

    // The filter hides what does not match, also for messages that arrive later. It also
    // searches ids, so its text has letters no hex id holds.
    await page.getByLabel("Filter").fill("lovelace");
    await events.filter({ hasText: "login" }).waitFor({ state: "hidden" });
    await publish(url, "events", JSON.stringify({ kind: "logout", user: "bob" }));
    await page.getByText("3 received · 1 shown").waitFor();
    await page.getByLabel("Filter").fill("");
    await page.getByText("3 received · 3 shown").waitFor();

    // A message's details.
    await events.filter({ hasText: "signup" }).getByRole("button").click();
    await page.locator("article.message pre.payload", { hasText: '"user": "lovelace"' }).waitFor();
  });
});

Deno.test("webhooks: add one, see its attempts and state, delete it", async () => {
  const hits: string[] = [];
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      hits.push(await req.text());
      return new Response("thanks", { status: 200 });
    },
  );
  const hook = `http://127.0.0.1:${receiver.addr.port}/hook`;
  try {
    await withDashboard({ webhookAllow: LOOPBACK_ALLOW }, async ({ page, url, open }) => {
      await publish(url, "orders", "before"); // the topic exists
      await open("#/webhooks/orders");
      await page.getByText("No webhooks on orders.").waitFor();
      await page.locator("#wh-url").fill(hook);
      await page.locator("#wh-secret").fill("whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=");
      await page.getByRole("button", { name: "Add webhook" }).click();
      await page.locator(".status.ok", { hasText: `Added ${hook} to orders (signed)` }).waitFor();
      const row = page.locator("main table tbody tr", { hasText: hook });
      await row.waitFor();
      assert((await row.textContent())!.includes("active"));

      await publish(url, "orders", "pushed");
      await row.filter({ hasText: "delivered, HTTP 200" }).waitFor();
      assertEquals(hits, ["pushed"]);
      await row.getByRole("button", { name: `Attempts of ${hook}` }).click();
      const log = page.locator("section[aria-labelledby=log-h]");
      await log.locator("tbody tr", { hasText: "delivered" }).waitFor();

      // A refused registration shows the broker's detail.
      await page.locator("#wh-url").fill(hook);
      await page.getByRole("button", { name: "Add webhook" }).click();
      await page.locator(".status.error", { hasText: "already" }).waitFor();

      await row.getByRole("button", { name: `Delete webhook ${hook}` }).click();
      const dialog = page.getByRole("dialog", { name: "Delete this webhook?" });
      await dialog.getByRole("button", { name: "Delete" }).click();
      await page.locator(".status.ok", { hasText: `Deleted the webhook to ${hook}` }).waitFor();
      await row.waitFor({ state: "detached" });
      assertEquals((await call(url, "GET", "/api/webhooks?topic=orders")).body, []);
    }, { allowErrors: [/status of 409/] });
  } finally {
    await receiver.shutdown();
  }
});
