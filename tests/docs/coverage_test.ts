/**
 * The reference pages cover what the code has: every problem `code` in docs/api/README.md, every
 * setting (variable and flag) in docs/operating.md, every metric a real broker exposes in
 * docs/metrics.md. A new code, setting or metric fails here until its page says what it means.
 */

import { assertEquals } from "../_support/assert.ts";
import { call } from "../_support/http.ts";
import { startBroker } from "../_support/server.ts";
import { SETTINGS } from "../../lib/config.ts";
import { ERROR_CODES } from "../../protocol/error_codes.ts";
import { ROOT } from "./markdown.ts";

const page = (path: string) => Deno.readTextFile(ROOT + path);
/** The names of `names` that `text` does not show in backticks. */
const missing = (text: string, names: readonly string[]) =>
  names.filter((n) => !text.includes("`" + n + "`"));

Deno.test("docs/api/README.md names every problem code", async () => {
  assertEquals(missing(await page("docs/api/README.md"), ERROR_CODES), []);
});

Deno.test("docs/operating.md names every setting, as a variable and as a flag", async () => {
  const text = await page("docs/operating.md");
  assertEquals(missing(text, SETTINGS.map((s) => s.env)), [], "variables");
  assertEquals(missing(text, SETTINGS.map((s) => s.flag)), [], "flags");
});

Deno.test("docs/metrics.md explains every metric a broker exposes", async () => {
  const b = await startBroker();
  try {
    const res = await call(b.url, "GET", "/metrics");
    const names = [...res.text.matchAll(/^# HELP (\S+)/gm)].map((m) => m[1]!);
    assertEquals(missing(await page("docs/metrics.md"), names), []);
  } finally {
    await b.close();
  }
});
