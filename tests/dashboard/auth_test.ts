/**
 * The dashboard with API keys on, in Chromium: the page loads without a key, asks for one on the
 * first 401, keeps it for the tab, sends it, and says clearly what a 401 or 403 means.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { withDashboard } from "../_support/browser.ts";
import { call, publish } from "../_support/http.ts";

const ADMIN = "dash-admin-7f3a";
const PUBLISHER = "dash-pub-19c2";
const KEYS = { apiKeys: `${ADMIN},${PUBLISHER}:publish` };
const AUTH = { headers: { authorization: `Bearer ${ADMIN}` } };

/** The 401s and 403s these tests provoke are logged by Chromium as console errors. */
const REFUSED = { allowErrors: [/the server responded with a status of 40[13]/] };

Deno.test("with API keys on, the page asks for a key, keeps it for the tab and sends it", async () => {
  await withDashboard(KEYS, async ({ page, url, open }) => {
    await publish(url, "secret-orders", "x", "", AUTH.headers);
    await open();
    // The page itself loaded without a key; the data asks for one.
    const dialog = page.getByRole("dialog", { name: "API key" });
    await dialog.waitFor();
    await dialog.getByText("Missing API key").waitFor();
    assertEquals(await page.getByRole("link", { name: "secret-orders" }).count(), 0);

    // A wrong key: the broker's detail, and the dialog again.
    await dialog.getByLabel("API key").fill("not-a-key");
    await dialog.getByRole("button", { name: "Use key" }).click();
    await dialog.getByText("Invalid API key").waitFor();

    await dialog.getByLabel("API key").fill(ADMIN);
    await dialog.getByRole("button", { name: "Use key" }).click();
    await page.getByRole("link", { name: "secret-orders" }).waitFor();
    assert(!(await dialog.isVisible()));
    assertEquals(await page.evaluate("sessionStorage.getItem('ferry.apiKey')"), ADMIN);

    // A reload of the tab keeps the key: no dialog, the data shows.
    await page.reload();
    await page.getByRole("link", { name: "secret-orders" }).waitFor();
    assert(!(await dialog.isVisible()));
    await page.getByRole("button", { name: /API key/ }).getByText("✓").waitFor();

    // The live tail passes the key in the query (EventSource sends no headers).
    await page.goto(`${url}/dashboard#/live/secret-orders`);
    await page.locator(".pill", { hasText: "live" }).waitFor();
    await publish(url, "secret-orders", "tailed with a key", "", AUTH.headers);
    await page.locator("li.event", { hasText: "tailed with a key" }).waitFor();
  }, REFUSED);
});

Deno.test("a key without the scope a view needs gets a clear 403 message", async () => {
  await withDashboard(KEYS, async ({ page, url, open }) => {
    await open();
    const dialog = page.getByRole("dialog", { name: "API key" });
    await dialog.waitFor();
    await dialog.getByLabel("API key").fill(PUBLISHER);
    await dialog.getByRole("button", { name: "Use key" }).click();
    const banner = page.getByRole("alert");
    await banner.getByText('This API key lacks the "admin" scope').waitFor();
    assert((await banner.textContent())!.includes("Use a key with that scope"));
    // The banner offers the dialog again.
    await banner.getByRole("button", { name: "Enter API key" }).click();
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Forget key" }).click();
    // The dialog's close event, which forgets the key, comes in a task after the click.
    await page.waitForFunction("sessionStorage.getItem('ferry.apiKey') === null");

    // Cancelling the dialog leaves a banner that says what is missing, and no new dialog.
    await dialog.waitFor(); // the 401 after forgetting asks again
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await banner.getByText("Missing API key").waitFor();
    await banner.getByText("Enter an API key to continue").waitFor();
    // Still refused on the broker's side, whatever the page does.
    assertEquals((await call(url, "GET", "/api/queues")).status, 401);
  }, REFUSED);
});
