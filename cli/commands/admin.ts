/** Operators' commands: topics, topic create/purge/delete, groups, redrive, stats, health, drain. */

import type { Ctx } from "../context.ts";
import { refused } from "../failure.ts";
import { shown } from "../escape.ts";
import { age, count, relative, size, span } from "../format.ts";
import { table } from "../table.ts";

/** `ferry topics`: every topic with its depth, in-flight, delayed and DLQ counts. */
export async function topics(ctx: Ctx): Promise<void> {
  const items = await ctx.ferry.queues();
  if (ctx.out.json) return await ctx.out.document(items);
  const rows = items.map((q) => [
    shown(q.name),
    q.depth,
    q.in_flight,
    q.delayed,
    q.dlq_depth,
    q.groups.length,
    shown(q.policy),
    shown(q.retain ?? "-"),
    age(q.oldest_age_seconds, q.depth + q.in_flight + q.delayed > 0),
  ]);
  await ctx.out.print(table(
    [
      { head: "TOPIC" },
      { head: "DEPTH", numeric: true },
      { head: "IN FLIGHT", numeric: true },
      { head: "DELAYED", numeric: true },
      { head: "DLQ", numeric: true },
      { head: "GROUPS", numeric: true },
      { head: "POLICY" },
      { head: "RETAIN" },
      { head: "OLDEST" },
    ],
    rows,
    ctx.out.paint,
    "No topics yet: `ferry publish <topic> <data>` creates one",
  ));
}

/** `ferry topic create <name> [--policy --retain]`. */
export async function createTopic(
  ctx: Ctx,
  name: string,
  flags: { policy?: "reject" | "drop-oldest"; retain?: string },
): Promise<void> {
  const topic = await ctx.ferry.createTopic(name, {
    policy: flags.policy,
    retention: flags.retain,
  });
  if (ctx.out.json) return await ctx.out.document(topic);
  const retain = topic.retain ? `, messages kept ${topic.retain}` : "";
  await ctx.out.print(shown(`Created topic "${topic.name}" (policy ${topic.policy}${retain})`));
}

/** `ferry topic purge <name>`: removes every message. */
export async function purge(ctx: Ctx, name: string): Promise<void> {
  const answer = await ctx.ferry.purge(name);
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(`Purged ${count(answer.purged, "message")} from "${shown(answer.queue)}"`);
}

/** `ferry topic delete <name>`: the topic and its WAL file. */
export async function deleteTopic(ctx: Ctx, name: string): Promise<void> {
  const answer = await ctx.ferry.deleteTopic(name);
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(`Deleted topic "${shown(answer.queue)}" and its WAL file`);
}

/** `ferry groups <topic>`: the named consumer groups. */
export async function groups(ctx: Ctx, topic: string): Promise<void> {
  const items = await ctx.ferry.groups(topic);
  if (ctx.out.json) return await ctx.out.document(items);
  const now = Date.now();
  const rows = items.map((g) => [
    g.group ? shown(g.group) : ctx.out.paint.dim("(default)"),
    relative(g.created_at, now),
  ]);
  await ctx.out.print(table([{ head: "GROUP" }, { head: "CREATED" }], rows, ctx.out.paint));
}

/** `ferry redrive <topic>`: moves `<topic>.dlq` back. */
export async function redrive(ctx: Ctx, topic: string): Promise<void> {
  const answer = await ctx.ferry.redrive(topic);
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(
    shown(
      `Moved ${count(answer.moved, "message")} from "${answer.source}" back to "${answer.queue}"`,
    ),
  );
}

/** `ferry stats`: uptime, totals, memory and per-topic figures. */
export async function stats(ctx: Ctx): Promise<void> {
  const s = await ctx.ferry.stats();
  if (ctx.out.json) return await ctx.out.document(s);
  const p = ctx.out.paint;
  const t = s.totals;
  const lines = [
    `${p.bold("uptime")} ${span(s.uptime_seconds * 1000)}`,
    `${p.bold("totals")} published ${t.published}, delivered ${t.delivered}, acked ${t.acked}, ` +
    `requeued ${t.requeued}, dead-lettered ${t.dead_lettered}, expired ${t.expired}`,
  ];
  if (s.memory) {
    lines.push(
      `${p.bold("memory")} ${size(s.memory.held_bytes)} held of ${size(s.memory.budget_bytes)}`,
    );
  }
  const rows = Object.entries(s.topics).map(([name, f]) => [
    shown(name),
    f.depth,
    f.in_flight,
    f.delayed,
    Object.keys(f.groups ?? {}).filter((g) => g !== "").length, // named groups, as `topics`
    size(f.held_bytes ?? 0),
    age(f.oldest_age_seconds, f.depth + f.in_flight + f.delayed > 0),
  ]);
  lines.push(
    "",
    table(
      [
        { head: "TOPIC" },
        { head: "DEPTH", numeric: true },
        { head: "IN FLIGHT", numeric: true },
        { head: "DELAYED", numeric: true },
        { head: "GROUPS", numeric: true },
        { head: "HELD", numeric: true },
        { head: "OLDEST" },
      ],
      rows,
      p,
      "No topics",
    ),
  );
  await ctx.out.print(lines.join("\n"));
}

/** Prints the health answer; a broker that is not `ok` (draining, electing) exits 1. */
export async function health(ctx: Ctx): Promise<void> {
  const h = await ctx.ferry.health(); // a 503 answer's body too: it says why
  if (ctx.out.json) await ctx.out.document(h);
  else {
    const p = ctx.out.paint;
    const facts = [h.status === "ok" ? p.green("ok") : p.red(shown(h.status))];
    if (h.version) facts.push(`version ${shown(h.version)}`);
    if (h.uptime_seconds !== undefined) facts.push(`up ${span(h.uptime_seconds * 1000)}`);
    if (h.cluster_role) facts.push(shown(`${h.cluster_role}, term ${h.cluster_term}`));
    await ctx.out.print(`${facts.join("  ")}  ${p.dim(ctx.settings.url)}`);
  }
  if (h.status !== "ok") {
    throw refused(`The broker at ${ctx.settings.url} is ${h.status}; it takes no requests now`);
  }
}

/** `ferry drain`: the broker takes no more requests until it restarts. */
export async function drain(ctx: Ctx): Promise<void> {
  const answer = await ctx.ferry.drain();
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(
    `Draining: ${count(answer.in_flight_requests, "request")} still in flight; every new ` +
      `request now gets 503 until the broker restarts`,
  );
}
