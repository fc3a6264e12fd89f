/**
 * The dashboard's overview in Chromium against a real broker: the queue table with its figures,
 * live updates, 1,000 queues paged, filtered and sorted, the broker card, keyboard use and a
 * phone-sized screen.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { withDashboard } from "../_support/browser.ts";
import { call, publish } from "../_support/http.ts";

/** The overview's row of a queue. */
const rowOf = (page: import("playwright-core").Page, name: string) =>
  page.locator("table.queues tbody tr", {
    has: page.getByRole("link", { name, exact: true }),
  });

Deno.test("the overview lists a queue a test created, with its figures, and follows changes", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await call(url, "POST", "/api/groups", { json: { topic: "orders", group: "billing" } });
    await publish(url, "orders", "a");
    await publish(url, "orders", "b");
    await open();
    const row = rowOf(page, "orders");
    await row.waitFor();
    const cells = row.locator("td");
    assertEquals(await cells.nth(0).textContent(), "2"); // ready
    assertEquals(await cells.nth(1).textContent(), "0"); // in flight
    assertEquals(await cells.nth(4).textContent(), "1"); // groups: billing
    // The table follows the broker: a consume moves one message to in flight.
    await call(url, "GET", "/consume/orders");
    await cells.nth(1).filter({ hasText: /^1$/ }).waitFor();
    assertEquals(await cells.nth(0).textContent(), "1");
    // The broker card.
    await page.locator("dd", { hasText: /^ok$/ }).waitFor();
    // A standalone broker has no cluster role or term to show.
    await page.locator("dt:text-is('Cluster') + dd", { hasText: /^standalone$/ }).waitFor();
    assertEquals(await page.locator("dt:text-is('Role') + dd").textContent(), "standalone");
    await page.locator("#health", { hasText: "healthy" }).waitFor();
    // The queue's name leads to its view.
    await row.getByRole("link", { name: "orders" }).click();
    await page.locator("h1", { hasText: "orders" }).waitFor();
    assert(page.url().endsWith("#/queue/orders"), page.url());
  });
});

Deno.test("1,000 queues are paged 50 at a time, and filter and sort", async () => {
  await withDashboard({ maxTopics: 2000 }, async ({ page, url, open }) => {
    for (let i = 0; i < 1000; i++) {
      const res = await call(url, "POST", "/api/topics", {
        json: { name: `q-${String(i).padStart(4, "0")}` },
      });
      assertEquals(res.status, 201, res.text);
    }
    for (let i = 0; i < 3; i++) await publish(url, "q-0500", `m${i}`);
    await open();
    await page.getByText("1–50 of 1,000, page 1 of 20").waitFor();
    assertEquals(await page.locator("table.queues tbody tr").count(), 50);
    await page.getByRole("button", { name: "Next ›" }).click();
    await page.getByText("51–100 of 1,000, page 2 of 20").waitFor();
    assertEquals(
      await page.locator("table.queues tbody tr").first().locator("th").textContent(),
      "q-0050",
    );

    await page.getByLabel("Filter").fill("q-09");
    await page.getByText("1–50 of 100, page 1 of 2").waitFor();
    await page.getByLabel("Filter").fill("q-0500");
    await page.getByText("1–1 of 1, page 1 of 1").waitFor();
    await page.getByLabel("Filter").fill("");

    // Sorting by Ready puts the one queue with messages first.
    const ready = page.getByRole("button", { name: "Ready" });
    await ready.click();
    await page.locator("th[aria-sort=descending]", { has: ready }).waitFor();
    assertEquals(
      await page.locator("table.queues tbody tr").first().locator("th").textContent(),
      "q-0500",
    );
    await ready.click();
    await page.locator("th[aria-sort=ascending]", { has: ready }).waitFor();
  });
});

Deno.test("the overview is usable from the keyboard: skip link, navigation, visible focus", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await publish(url, "orders", "a");
    await open();
    await rowOf(page, "orders").waitFor();
    await page.keyboard.press("Tab");
    assertEquals(await page.evaluate("document.activeElement?.textContent"), "Skip to content");
    await page.keyboard.press("Enter");
    assertEquals(await page.evaluate("document.activeElement?.id"), "main");
    // From the content, Tab reaches the filter, and the focus ring shows.
    await page.getByLabel("Filter").focus();
    await page.keyboard.press("Tab");
    const outline = await page.evaluate(
      "({ id: document.activeElement.id, style: getComputedStyle(document.activeElement).outlineStyle })",
    ) as { id: string; style: string };
    assertEquals(outline.id, "hide-dlq");
    assert(outline.style !== "none", `no visible focus: ${JSON.stringify(outline)}`);
    // Enter on a queue's link opens it, and focus lands on the view's heading.
    await rowOf(page, "orders").getByRole("link").focus();
    await page.keyboard.press("Enter");
    await page.locator("h1", { hasText: "orders" }).waitFor();
    assertEquals(await page.evaluate("document.activeElement?.tagName"), "H1");
  });
});

Deno.test("on a phone-sized screen the page does not scroll sideways", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await publish(url, "a-long-queue-name-for-a-small-screen", "a");
    for (const hash of ["#/", "#/queue/a-long-queue-name-for-a-small-screen", "#/webhooks"]) {
      await open(hash);
      await page.locator("main h1").waitFor();
      const widths = await page.evaluate(
        "({ page: document.documentElement.scrollWidth, view: innerWidth })",
      ) as { page: number; view: number };
      assert(widths.page <= widths.view, `${hash}: ${JSON.stringify(widths)}`);
      const nav = page.getByRole("navigation", { name: "Views" });
      assert(await nav.getByRole("link", { name: "Live tail" }).isVisible(), hash);
    }
  }, { viewport: { width: 390, height: 844 } });
});
