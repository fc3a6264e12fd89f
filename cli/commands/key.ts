/**
 * `ferry key hash [key]`: the keys-file entry that stands for a key without holding it
 * (`sha256:<hex>`). Read from stdin when no key is given (or `-`), so the key stays out of the
 * shell's history; nothing is sent to a broker.
 */

import { hashedKey } from "../../protocol/key_hash.ts";
import type { Ctx } from "../context.ts";
import { usage } from "../failure.ts";

export async function hashKey(ctx: Ctx, given: string | undefined): Promise<void> {
  let key = given;
  if (key === undefined || key === "-") {
    if (ctx.stdinIsTerminal) ctx.out.notice("reading the key from stdin; end it with Ctrl-D");
    key = (await new Response(Deno.stdin.readable).text()).replace(/\r?\n$/, "");
  }
  if (key === "") throw usage("Nothing to hash: give the key as an argument or on stdin");
  const entry = await hashedKey(key);
  if (ctx.out.json) return await ctx.out.document({ entry });
  await ctx.out.print(entry);
}
