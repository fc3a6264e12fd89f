/**
 * The dead-letter view in Chromium against a real broker: messages requeued three times over
 * HTTP show up with their reason, retry count and group, and are redriven selected or all.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { withDashboard } from "../_support/browser.ts";
import { call, consume, publish, queues } from "../_support/http.ts";

/** Publishes `text` and requeues it three times with `reason`: it ends in `{topic}.dlq`. */
async function deadLetter(url: string, topic: string, text: string, reason: string, group = "") {
  const { id } = await publish(url, topic, text);
  const g = group ? `group=${group}&` : "";
  for (let i = 0; i < 3; i++) {
    const m = await consume(url, topic, g);
    assertEquals(m.id, id);
    const r = await call(url, "POST", `/requeue?${g}reason=${encodeURIComponent(reason)}`, {
      json: m,
    });
    assertEquals(r.status, 200, r.text);
  }
  return id as string;
}

Deno.test("dead letters show reason, retries and group, and are redriven selected, then all", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    const first = await deadLetter(url, "jobs", "job one", "worker crashed");
    const second = await deadLetter(url, "jobs", "job two", "HTTP 502 from the API");
    assertEquals((await queues(url)).get("jobs")!.dlq_depth, 2);

    // The overview flags it, and its DLQ badge leads here.
    await open();
    await page.getByRole("link", { name: "2 dead letters of jobs" }).click();
    await page.locator("h1", { hasText: "Dead letters of jobs" }).waitFor();
    const rows = page.locator("main table tbody tr");
    await rows.nth(1).waitFor();
    const row1 = rows.filter({ has: page.locator(`code[title="${first}"]`) });
    const text = (await row1.textContent()) ?? "";
    assert(text.includes("worker crashed") && text.includes("job one"), text);
    assertEquals(await row1.locator("td").nth(3).textContent(), "3");
    assertEquals(await row1.locator("td").nth(4).textContent(), "(default)");

    // The full message, on demand.
    await row1.getByRole("button", { name: `Show ${first}` }).click();
    await page.locator("article.message dd", { hasText: "worker crashed" }).waitFor();

    // Redrive the selected one.
    await row1.getByRole("checkbox").check();
    await page.getByRole("button", { name: "Redrive selected (1)" }).click();
    await page.locator(".status.ok", { hasText: "Moved 1 message(s) of 1 selected back to jobs" })
      .waitFor();
    await rows.nth(1).waitFor({ state: "detached" });
    let q = (await queues(url)).get("jobs")!;
    assertEquals([q.depth, q.dlq_depth], [1, 1]);
    const back = await consume(url, "jobs");
    assertEquals([back.id, back.retry_count, back.redrive_count], [first, 0, 1]);
    await call(url, "POST", `/ack/jobs/${back.id}`);

    // Redrive all: the rest.
    await page.getByRole("button", { name: "Redrive all" }).click();
    await page.locator(".status.ok", { hasText: "Moved 1 message(s) back to jobs" }).waitFor();
    await page.getByText("No dead letters.").waitFor();
    q = (await queues(url)).get("jobs")!;
    assertEquals([q.depth, q.dlq_depth], [1, 0]);
    assertEquals((await consume(url, "jobs")).id, second);
  });
});

Deno.test("the dead-letter list names the topics that have some, and a group's dead letters", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await call(url, "POST", "/api/groups", { json: { topic: "mail", group: "smtp" } });
    const id = await deadLetter(url, "mail", "hello", "550 mailbox unavailable", "smtp");
    await publish(url, "quiet", "fine");
    await open("#/dlq");
    const link = page.getByRole("link", { name: "mail", exact: true });
    await link.waitFor();
    assertEquals(await page.getByRole("link", { name: "quiet", exact: true }).count(), 0);
    await link.click();
    const row = page.locator("main table tbody tr", { has: page.locator(`code[title="${id}"]`) });
    await row.waitFor();
    assertEquals(await row.locator("td").nth(4).textContent(), "smtp");
    await row.getByRole("checkbox").check();
    await page.getByRole("button", { name: "Redrive selected (1)" }).click();
    await page.locator(".status.ok", { hasText: "Moved 1 message(s)" }).waitFor();
    // Back to the group it failed in, not to the default group.
    assertEquals((await consume(url, "mail", "group=smtp")).id, id);
  });
});
