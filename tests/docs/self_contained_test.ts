/**
 * The repository is self-contained: no tracked file cites the team's notes outside it (the
 * contract, the spec, the reviews): the docs under docs/ are the reference code comments cite.
 */

import { assert } from "../_support/assert.ts";
import { ROOT } from "./markdown.ts";

/** How a citation of a file outside the repository looks. */
const OUTSIDE = /\bCONTRACT\b|\.\.\/shared\/|broker-http-interface\.md|STYLE\.md|PLATFORM\.md/;

Deno.test("docs: no tracked file cites a file outside the repository", async () => {
  const out = await new Deno.Command("git", { args: ["ls-files", "-z"], cwd: ROOT }).output();
  assert(out.success, "git ls-files failed");
  const self = new URL(import.meta.url).pathname.slice(ROOT.length);
  const files = new TextDecoder().decode(out.stdout).split("\0").filter((f) =>
    f && f !== self && f !== "LICENSE" && !/\.(png|ico|woff2?|lock|sum)$/.test(f)
  );
  const found: string[] = [];
  for (const file of files) {
    const text = await Deno.readTextFile(ROOT + file).catch(() => "");
    text.split("\n").forEach((line, i) => {
      if (OUTSIDE.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert(found.length === 0, `citations of files outside the repository:\n${found.join("\n")}`);
});
