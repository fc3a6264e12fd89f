/**
 * A queue's view in Chromium against a real broker: publish through the form and peek the
 * message, consume with and without ack, release an in-flight message, and purge and delete
 * behind the dialog that asks for the queue's name.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { withDashboard } from "../_support/browser.ts";
import { call, consume, publish, queues } from "../_support/http.ts";

/** Chromium logs every 4xx answer as a console error; these tests provoke some on purpose. */
const REFUSED = { allowErrors: [/the server responded with a status of 40[04]/] };

Deno.test("publish through the form, peek the message, then consume it", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await call(url, "POST", "/api/topics", { json: { name: "orders", visibility: "45s" } });
    await open("#/queue/orders");
    await page.locator("dd", { hasText: /^45s$/ }).waitFor(); // settings from /api/topics/orders

    await page.getByRole("textbox", { name: "Payload" }).fill('{"sku":"a1","qty":2}');
    await page.getByLabel("Headers").fill("X-MQ-Trace: t-1\nx-mq-tenant: acme");
    await page.getByLabel("Priority").selectOption("high");
    await page.getByLabel("TTL").fill("1h");
    await page.getByRole("button", { name: "Publish" }).click();
    const published = page.locator(".status.ok", { hasText: /^Published / });
    await published.waitFor();
    const id = (await published.textContent())!.replace("Published ", "");

    // The broker has it, as the form said.
    const [peeked] = (await call(url, "GET", "/api/queues/peek?queue=orders")).body;
    assertEquals(peeked.id, id);
    assertEquals(peeked.priority, "high");
    assertEquals(peeked.headers, { "x-mq-trace": "t-1", "x-mq-tenant": "acme" });
    assert(peeked.expires_at, "the TTL was sent");

    // Peek shows it: JSON pretty-printed, headers, priority, retry count.
    await page.getByRole("button", { name: "Peek", exact: true }).click();
    const card = page.locator("article.message", { hasText: id });
    await card.waitFor();
    assertEquals(
      await card.locator("pre.payload").textContent(),
      '{\n  "sku": "a1",\n  "qty": 2\n}',
    );
    assert((await card.textContent())!.includes("x-mq-trace"));
    await card.locator("dd", { hasText: /^high$/ }).waitFor();
    await card.getByRole("button", { name: "Hex" }).click();
    await card.locator("pre.payload", { hasText: "7b 22 73 6b" }).waitFor();
    await card.getByRole("button", { name: "Base64" }).click();
    await card.locator("pre.payload", { hasText: peeked.payload }).waitFor();

    // Consume and ack: the queue is empty afterwards.
    await page.getByRole("button", { name: "Consume and ack" }).click();
    await page.locator(".status.ok", { hasText: `Consumed and acked ${id}` }).waitFor();
    const q = (await queues(url)).get("orders")!;
    assertEquals([q.depth, q.in_flight], [0, 0]);

    // Nothing left: the broker's problem detail shows.
    await page.getByRole("button", { name: "Consume and ack" }).click();
    await page.locator(".status.error", { hasText: 'No message available in "orders"' }).waitFor();
  }, REFUSED);
});

Deno.test("a binary payload peeks as hex, and a bad header line is refused before sending", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await publish(url, "bin", new Uint8Array([0, 1, 2, 0xff, 0xfe]));
    await open("#/queue/bin");
    await page.getByRole("button", { name: "Peek", exact: true }).click();
    const card = page.locator("article.message");
    await card.locator("pre.payload", { hasText: "00 01 02 ff fe" }).waitFor();
    assertEquals(await card.getByRole("button", { name: "Text" }).count(), 0);

    await page.getByRole("textbox", { name: "Payload" }).fill("x");
    await page.getByLabel("Headers").fill("Trace t-1");
    await page.getByRole("button", { name: "Publish" }).click();
    await page.locator(".status.error", { hasText: 'Header line "Trace t-1"' }).waitFor();
    // A delay that is not a duration is caught by the form; one the broker refuses shows its detail.
    await page.getByLabel("Headers").fill("");
    await page.getByLabel("Delay").fill("soon");
    await page.getByRole("button", { name: "Publish" }).click();
    assertEquals(await page.locator("#pub-delay:invalid").count(), 1);
    await page.getByLabel("Delay").fill("9999h");
    await page.getByRole("button", { name: "Publish" }).click();
    await page.locator(".status.error", { hasText: '"9999h"' }).waitFor();
    assertEquals((await queues(url)).get("bin")!.depth, 1);
  }, REFUSED);
});

Deno.test("consume without ack leaves the message in flight; Release gives it back", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await publish(url, "jobs", "first");
    await publish(url, "jobs", "second");
    await open("#/queue/jobs");
    await page.getByRole("button", { name: "Consume without ack" }).click();
    await page.locator(".status.ok", { hasText: "stays in flight" }).waitFor();

    // It shows in the in-flight list with its lease end; another one taken over HTTP joins it.
    const taken = await consume(url, "jobs", "visibility=1h");
    const rows = page.locator("section[aria-labelledby=inflight-h] tbody tr");
    await rows.nth(1).waitFor();
    const row = rows.filter({ has: page.locator(`code[title="${taken.id}"]`) });
    const text = (await row.textContent()) ?? "";
    assert(text.includes("(in "), text);
    await row.getByRole("button", { name: `Release ${taken.id}` }).click();
    await page.locator(".status.ok", { hasText: `Released ${taken.id}` }).waitFor();
    await rows.nth(1).waitFor({ state: "detached" });
    const q = (await queues(url)).get("jobs")!;
    assertEquals([q.depth, q.in_flight], [1, 1]);
    const again = await consume(url, "jobs", "visibility=1h");
    assertEquals(again.id, taken.id);
    assertEquals(again.retry_count, 0, "a release is not a failed attempt");

    // The message consumed in the page can be acked from its card.
    await page.getByRole("button", { name: "Ack it" }).click();
    await page.locator(".status.ok", { hasText: /^Acked$/ }).waitFor();
    assertEquals((await queues(url)).get("jobs")!.in_flight, 1);
  });
});

Deno.test("purge and delete ask for the queue's name first", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    for (const t of ["a", "b", "c"]) await publish(url, "doomed", t);
    await open("#/queue/doomed");

    // Cancel changes nothing.
    await page.getByRole("button", { name: "Purge…" }).click();
    const dialog = page.getByRole("dialog", { name: "Purge doomed?" });
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await page.locator(".status.ok", { hasText: "Purge cancelled" }).waitFor();
    assertEquals((await queues(url)).get("doomed")!.depth, 3);

    await page.getByRole("button", { name: "Purge…" }).click();
    await dialog.waitFor();
    const purge = dialog.getByRole("button", { name: "Purge" });
    assert(await purge.isDisabled());
    await dialog.getByRole("textbox").fill("doome");
    assert(await purge.isDisabled(), "a wrong name keeps the button disabled");
    await dialog.getByRole("textbox").fill("doomed");
    await purge.click();
    await page.locator(".status.ok", { hasText: "Purged 3 message(s)" }).waitFor();
    assertEquals((await queues(url)).get("doomed")!.depth, 0);

    // Escape closes the dialog without deleting.
    await page.getByRole("button", { name: "Delete queue…" }).click();
    const del = page.getByRole("dialog", { name: "Delete doomed?" });
    await del.waitFor();
    await page.keyboard.press("Escape");
    await del.waitFor({ state: "detached" });
    assert((await queues(url)).has("doomed"));

    await page.getByRole("button", { name: "Delete queue…" }).click();
    await del.getByRole("textbox").fill("doomed");
    await del.getByRole("button", { name: "Delete" }).click();
    await page.locator(".notice", { hasText: "Deleted queue doomed" }).waitFor();
    assert(page.url().endsWith("#/"), page.url());
    assert(!(await queues(url)).has("doomed"));
  });
});

Deno.test("the view of a queue that does not exist yet says so, and publishing creates it", async () => {
  await withDashboard({}, async ({ page, url, open }) => {
    await open("#/queue/fresh");
    await page.getByText('There is no queue named "fresh" (yet)').waitFor();
    await page.getByRole("textbox", { name: "Payload" }).fill("first");
    await page.getByRole("button", { name: "Publish" }).click();
    await page.locator(".status.ok", { hasText: /^Published / }).waitFor();
    await page.getByText('There is no queue named "fresh" (yet)').waitFor({ state: "hidden" });
    await page.locator("dd", { hasText: /^30s$/ }).waitFor(); // its settings, read once it exists
    assertEquals((await queues(url)).get("fresh")!.depth, 1);
  }, REFUSED);
});
