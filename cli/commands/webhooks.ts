/** `webhook add <topic> <url> [--secret]`, `webhook list <topic>`, `webhook delete <id>`. */

import type { Ctx } from "../context.ts";
import { shown } from "../escape.ts";
import { relative } from "../format.ts";
import { table } from "../table.ts";

/** `ferry webhook add <topic> <url> [--secret]`. */
export async function addWebhook(
  ctx: Ctx,
  topic: string,
  url: string,
  flags: { secret?: string },
): Promise<void> {
  const w = await ctx.ferry.addWebhook(topic, url, { secret: flags.secret });
  if (ctx.out.json) return await ctx.out.document(w);
  const signed = w.signed ? "signed with the secret" : "unsigned: pass --secret to sign";
  await ctx.out.print(
    `Registered webhook ${ctx.out.paint.cyan(shown(w.id))}: "${shown(w.topic)}" → ${
      shown(w.url)
    } (${signed})`,
  );
}

/** `ferry webhook list <topic>`: state, backlog and last attempt of each. */
export async function listWebhooks(ctx: Ctx, topic: string): Promise<void> {
  const items = await ctx.ferry.webhooks(topic);
  if (ctx.out.json) return await ctx.out.document(items);
  const p = ctx.out.paint;
  const now = Date.now();
  const rows = items.map((w) => [
    p.cyan(shown(w.id)),
    shown(w.url),
    w.state === "active" ? w.state : p.yellow(shown(w.state)),
    w.pending,
    w.signed ? "yes" : "no",
    w.last_attempt
      ? shown(
        `${w.last_attempt.status ?? w.last_attempt.outcome} ${relative(w.last_attempt.at, now)}`,
      )
      : "-",
    shown(relative(w.created_at, now)),
  ]);
  await ctx.out.print(table(
    [
      { head: "ID" },
      { head: "URL" },
      { head: "STATE" },
      { head: "PENDING", numeric: true },
      { head: "SIGNED" },
      { head: "LAST ATTEMPT" },
      { head: "CREATED" },
    ],
    rows,
    p,
    `No webhooks on "${topic}": \`ferry webhook add ${topic} <url>\` registers one`,
  ));
}

/** `ferry webhook delete <id>`. */
export async function deleteWebhook(ctx: Ctx, id: string): Promise<void> {
  const answer = await ctx.ferry.deleteWebhook(id);
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(`Deleted webhook ${ctx.out.paint.cyan(id)}`);
}
