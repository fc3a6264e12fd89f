/**
 * GET /docs in headless Chromium: the page renders the broker's document with Swagger UI, lists
 * the publish operation, logs no console error, and asks nothing of any origin but the broker's
 * (API keys on: the page and the document are public).
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { launchBrowser } from "../_support/browser.ts";
import { startBroker } from "../_support/server.ts";

Deno.test({
  name: "GET /docs renders the API reference in Chromium, offline and without errors",
  // playwright-core keeps its own pipes and timers in the test process
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const broker = await startBroker({ dataDir: ":memory:", apiKeys: "k1:admin" });
    const browser = await launchBrowser();
    try {
      const { page } = browser;
      const res = await page.goto(`${broker.url}/docs`);
      assertEquals(res?.status(), 200);
      const publish = page.locator('.opblock-post [data-path="/publish/{topic}"]');
      await publish.first().waitFor({ timeout: 60_000 });
      assertEquals(
        await page.locator(".info .title").first().innerText().then((t) =>
          t.split("\n")[0]?.trim()
        ),
        "Ferry",
      );
      // Open the publish operation: its parameters come from the document.
      await publish.first().click();
      await page.locator('.opblock-post.is-open tr[data-param-name="ttl"]').waitFor({
        timeout: 30_000,
      });
      const operations = await page.locator(".opblock").count();
      assert(operations >= 30, `only ${operations} operations rendered`);
      if (Deno.env.get("FERRY_SCREENSHOT")) {
        await page.screenshot({ path: Deno.env.get("FERRY_SCREENSHOT")!, fullPage: false });
      }
      assertEquals(browser.errors, []);
      const elsewhere = browser.requests.filter((u) =>
        !u.startsWith(`${broker.url}/`) && !u.startsWith("data:")
      );
      assertEquals(elsewhere, [], "the page must ask nothing of any other origin");
      assert(browser.requests.includes(`${broker.url}/openapi.json`), browser.requests.join("\n"));
    } finally {
      await browser.close();
      await broker.close();
    }
  },
});
