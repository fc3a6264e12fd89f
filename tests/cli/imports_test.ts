/**
 * The CLI is built on the client: cli/ imports only cli/, clients/ts/mod.ts, protocol/ and its npm
 * packages, and never calls fetch itself, so one place speaks the wire.
 */

import { assertEquals } from "../_support/assert.ts";

const CLI = new URL("../../cli/", import.meta.url);

async function sources(dir: URL, out: URL[] = []): Promise<URL[]> {
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) await sources(new URL(`${e.name}/`, dir), out);
    else if (e.name.endsWith(".ts")) out.push(new URL(e.name, dir));
  }
  return out;
}

Deno.test("cli/ imports only cli/, clients/ts/mod.ts, protocol/ and npm packages; it has no fetch", async () => {
  const root = new URL("../../", import.meta.url).href;
  const wrong: string[] = [];
  for (const file of await sources(CLI)) {
    const text = await Deno.readTextFile(file);
    const name = file.href.slice(root.length);
    for (
      const [, spec] of text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["'];/gm)
    ) {
      if (!spec!.startsWith(".")) {
        if (!/^(commander|cli-table3|cli-progress|node:[a-z]+)$/.test(spec!)) {
          wrong.push(`${name} → ${spec}`);
        }
        continue;
      }
      const to = new URL(spec!, file).href.slice(root.length);
      if (!/^(cli\/|protocol\/|clients\/ts\/mod\.ts$)/.test(to)) wrong.push(`${name} → ${to}`);
    }
    if (/\bfetch\(/.test(text)) wrong.push(`${name} calls fetch`);
  }
  assertEquals(wrong, []);
});
