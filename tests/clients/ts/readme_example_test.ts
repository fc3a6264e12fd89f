/**
 * The README's client example runs as written: the block after the marker is run with `deno run`
 * from the checkout's root, as the README says to, against a fresh broker on loopback (its URL
 * put in place of the default one).
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { withLiveBroker } from "../../_support/server.ts";

const ROOT = new URL("../../../", import.meta.url);
/** The line that stands right before the example in README.md. */
export const MARKER = "<!-- tests/clients/ts/readme_example_test.ts runs the next block -->";

/** The fenced block after the marker, without its fences. */
function example(readme: string): string {
  const at = readme.indexOf(MARKER);
  assert(at >= 0, `README.md has no line ${MARKER}`);
  const m = /^```ts\n([\s\S]*?)^```$/m.exec(readme.slice(at + MARKER.length));
  assert(m, "no ```ts block after the marker");
  return m[1]!;
}

Deno.test("the README's client example runs as written against a fresh broker", async () => {
  const code = example(await Deno.readTextFile(new URL("README.md", ROOT)));
  assert(code.includes("http://127.0.0.1:7800"), "the example talks to the default address");
  await withLiveBroker(async (b) => {
    const child = new Deno.Command(Deno.execPath(), {
      // What the README tells a reader to run (type-checked too), with the source on stdin.
      args: ["run", "--quiet", "--check", "--allow-net", "-"],
      cwd: ROOT,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(code.replaceAll("http://127.0.0.1:7800", b.url)));
    await w.close();
    const out = await child.output();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr);
    assertEquals(out.code, 0, `stdout:\n${stdout}\nstderr:\n${stderr}`);
    assertEquals(stderr, "");
    assert(stdout.includes(`took { sku: "a1" }`), stdout);
  });
});
