/**
 * Test support: headless Chromium (Debian's, /usr/bin/chromium) driven by playwright-core, with
 * the flags PLATFORM.md lists and a fresh profile in a temp dir that `close()` removes.
 */

import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's Chromium; `tools/setup_test_deps.sh` installs it. */
export const CHROMIUM = "/usr/bin/chromium";

/** The flags PLATFORM.md lists for Chromium on these machines. */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A browser with one page, and what the page said and asked for. */
export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Console messages of type error, and uncaught page errors. */
  errors: string[];
  /** Every URL the page requested. */
  requests: string[];
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile; tests use `sanitizeOps: false` with it. */
export async function launchBrowser(): Promise<TestBrowser> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-browser-" });
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
    });
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
  const page = context.pages()[0] ?? await context.newPage();
  const errors: string[] = [];
  const requests: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("request", (r) => requests.push(r.url()));
  return {
    context,
    page,
    errors,
    requests,
    async close() {
      await context.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}
