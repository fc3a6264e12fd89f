/**
 * Test support: Debian's Chromium driven by playwright-core, headless, with a fresh profile in a
 * temp dir (flags that make it start in a container), against a broker on loopback. `withPage` always closes the
 * browser and removes the profile, and records what the page logged as errors.
 */

import { type BrowserContext, chromium, type Page } from "playwright-core";
import type { Config } from "../../lib/config.ts";
import { type InProcessBroker, startBroker } from "./server.ts";

/** Debian's Chromium (tools/setup_test_deps.sh installs it). */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * The flags Chromium needs on these machines: no sandbox (tests run as root in a container), no
 * GPU, and none of its own network traffic (QUIC, updates, sync).
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface PageSession {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught exceptions of the page, in order. */
  errors: string[];
}

export interface PageOptions {
  viewport?: { width: number; height: number };
  /** Console errors matching one of these are expected (a 401 the test provokes). */
  allowErrors?: RegExp[];
}

/** Starts Chromium with a fresh profile; the caller closes it with `closePage`. */
export async function openPage(opts: PageOptions = {}): Promise<PageSession & { dir: string }> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-chromium-" });
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: opts.viewport ?? { width: 1280, height: 900 },
      colorScheme: "light",
      locale: "en-GB",
    });
  } catch (e) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw e;
  }
  const page = context.pages()[0] ?? await context.newPage();
  const errors: string[] = [];
  const allowed = (text: string) => (opts.allowErrors ?? []).some((re) => re.test(text));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !allowed(msg.text())) errors.push(`console: ${msg.text()}`);
  });
  page.on("pageerror", (err) => errors.push(`page error: ${err.message}`));
  return { page, context, errors, dir };
}

/** Closes the browser and removes its profile. */
export async function closePage(s: { context: BrowserContext; dir: string }): Promise<void> {
  try {
    await s.context.close();
  } finally {
    await Deno.remove(s.dir, { recursive: true }).catch(() => {});
  }
}

/**
 * Runs `fn` with a page in a fresh Chromium, then closes it whatever happened; the test fails
 * if the page logged an error it did not expect.
 */
export async function withPage(
  fn: (s: PageSession) => Promise<void>,
  opts: PageOptions = {},
): Promise<void> {
  const s = await openPage(opts);
  try {
    await fn(s);
    if (s.errors.length) throw new Error(`the page logged errors:\n${s.errors.join("\n")}`);
  } finally {
    await closePage(s);
  }
}

/** A broker on loopback and a page on its dashboard. */
export interface Dashboard extends PageSession {
  broker: InProcessBroker;
  /** The broker's base URL. */
  url: string;
  /** Opens a view of the dashboard (`#/queue/orders`) and waits for its heading. */
  open(hash?: string): Promise<void>;
}

/**
 * Runs `fn` with a real broker (in memory, real clock, `overrides` applied) and Chromium on its
 * dashboard; always closes both.
 */
export async function withDashboard(
  overrides: Partial<Config>,
  fn: (d: Dashboard) => Promise<void>,
  opts: PageOptions = {},
): Promise<void> {
  const broker = await startBroker({ dataDir: ":memory:", ...overrides });
  try {
    await withPage(async (s) => {
      const open = async (hash = "#/") => {
        await s.page.goto(`${broker.url}/dashboard${hash}`);
        await s.page.locator("main h1").waitFor();
      };
      await fn({ ...s, broker, url: broker.url, open });
    }, opts);
  } finally {
    await broker.close();
  }
}

/** A browser with one page, and what the page said and asked for. */
export interface TestBrowser extends PageSession {
  /** Every URL the page requested. */
  requests: string[];
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile; `close()` ends it and removes the profile. */
export async function launchBrowser(opts: PageOptions = {}): Promise<TestBrowser> {
  const s = await openPage(opts);
  const requests: string[] = [];
  s.page.on("request", (r) => requests.push(r.url()));
  return { ...s, requests, close: () => closePage(s) };
}
