/** README.md stays the front door: short, with the rest in docs/. */

import { assert } from "../_support/assert.ts";
import { ROOT } from "./markdown.ts";

/** The most lines the front door may have; everything else has a page under docs/. */
const MAX_README_LINES = 200;

Deno.test("README.md is at most 200 lines and links into the docs index", async () => {
  const text = await Deno.readTextFile(ROOT + "README.md");
  const lines = text.trimEnd().split("\n").length;
  assert(lines <= MAX_README_LINES, `README.md has ${lines} lines; move detail into docs/`);
  assert(text.includes("](docs/README.md)"), "README.md links to docs/README.md");
});
