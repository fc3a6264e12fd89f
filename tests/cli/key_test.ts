/**
 * `ferry key hash`: the keys-file entry for a key, from an argument or stdin, with no broker;
 * a broker given that entry takes the key.
 */

import { assertEquals, assertMatch } from "../_support/assert.ts";
import { ferry } from "../_support/cli.ts";
import { KeyRing, parseKeyFile } from "../../lib/auth.ts";

Deno.test("ferry key hash prints a sha256: entry the broker's keys file accepts for that key", async () => {
  const fromArg = await ferry(["key", "hash", "team-secret-1"]);
  assertEquals(fromArg.code, 0, fromArg.stderr);
  const entry = fromArg.stdout.trim();
  assertMatch(entry, /^sha256:[0-9a-f]{64}$/);
  const fromStdin = await ferry(["key", "hash"], { stdin: "team-secret-1\n" });
  assertEquals(fromStdin.stdout.trim(), entry, "a key on stdin, its newline dropped");
  const json = await ferry(["--json", "key", "hash", "-"], { stdin: "team-secret-1" });
  assertEquals(JSON.parse(json.stdout), { entry });
  const ring = new KeyRing(parseKeyFile(`${entry}:publish\n`));
  assertEquals(ring.scopesOf("team-secret-1"), 1);
  assertEquals(ring.scopesOf("team-secret-2"), 0);
  const empty = await ferry(["key", "hash"], { stdin: "" });
  assertEquals(empty.code, 2, empty.stderr);
});
