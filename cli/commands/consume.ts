/**
 * `consume`, `ack`, `requeue` and `peek`. A consume prints what it took and then acks it (unless
 * --no-ack), so a message is never acked before it has been written out.
 */

import { FerryError } from "../../clients/ts/mod.ts";
import type { MessageJson } from "../../protocol/wire.ts";
import { pause, reconnectDelay } from "../backoff.ts";
import type { Ctx } from "../context.ts";
import { explain, lostBecause } from "../explain.ts";
import { CliFailure, EXIT, refused } from "../failure.ts";
import { shown } from "../escape.ts";
import { count, messageBlock, span } from "../format.ts";

/** The broker's longest long-poll; a longer --wait polls again until it has passed. */
const MAX_POLL_MS = 30_000;

/** The flags of `consume`, checked by the parser. */
export interface ConsumeFlags {
  limit: number;
  group?: string;
  /** Milliseconds to wait for a message when there is none. */
  wait: number;
  ack: boolean;
  follow?: boolean;
}

/**
 * `ferry consume <topic>`: takes, prints, then acks; with nothing to take, exits 1, and when
 * Ctrl-C ends the wait first, 130.
 */
export async function consume(ctx: Ctx, topic: string, flags: ConsumeFlags): Promise<void> {
  if (flags.follow) return await follow(ctx, topic, flags);
  const deadline = Date.now() + flags.wait;
  let messages: MessageJson[];
  while (true) {
    const left = Math.max(0, deadline - Date.now());
    messages = await take(ctx, topic, flags, Math.min(left, MAX_POLL_MS));
    if (messages.length || left <= MAX_POLL_MS || ctx.signal.aborted) break;
  }
  if (!messages.length && ctx.signal.aborted) {
    throw new CliFailure(
      EXIT.interrupted,
      `Interrupted while waiting for a message in "${topic}"; nothing was taken`,
    );
  }
  if (ctx.out.json) await ctx.out.document(messages);
  else await printBlocks(ctx, messages);
  if (!messages.length) throw refused(`No message available in "${topic}"${waitAdvice(flags)}`);
  if (flags.ack) await ackAll(ctx, topic, messages, flags.group);
}

/**
 * Takes and prints messages as they come until Ctrl-C; JSON mode prints one per line. Once it
 * has worked, a lost broker is waited for (1 s doubling to 32 s) instead of ending the command.
 */
async function follow(ctx: Ctx, topic: string, flags: ConsumeFlags): Promise<void> {
  let failures = 0;
  let worked = false;
  while (!ctx.signal.aborted) {
    let messages: MessageJson[];
    try {
      messages = await take(ctx, topic, flags, MAX_POLL_MS);
    } catch (e) {
      if (!worked || !isTransient(e)) throw e;
      const waitMs = reconnectDelay(failures++);
      const why = lostBecause(e, ctx.settings.url);
      ctx.out.notice(`lost "${topic}" (${why}); trying again in ${span(waitMs)}`);
      await pause(waitMs, ctx.signal);
      continue;
    }
    if (failures) ctx.out.notice(`consuming "${topic}" again`);
    failures = 0;
    worked = true;
    for (const m of messages) {
      if (ctx.out.json) await ctx.out.line(m);
      else await ctx.out.print(`${messageBlock(m, ctx.out.paint)}\n\n`);
    }
    if (flags.ack && messages.length) {
      await ackAll(ctx, topic, messages, flags.group).catch((e) =>
        ctx.out.notice(explain(e, ctx.settings.url).message)
      );
    }
  }
}

/** True for what waiting may mend: no answer, or a broker saying "not now" (429, 503). */
function isTransient(e: unknown): boolean {
  return e instanceof FerryError && (e.status === 0 || e.status === 429 || e.status === 503);
}

/**
 * One consume call; an empty queue is `[]`. Ctrl-C ends the wait at once: the request is
 * cancelled, and whatever the broker handed over meanwhile is not acked and comes back after
 * its lease.
 */
async function take(
  ctx: Ctx,
  topic: string,
  flags: ConsumeFlags,
  timeoutMs: number,
): Promise<MessageJson[]> {
  if (ctx.signal.aborted) return [];
  try {
    return await ctx.ferry.consume(topic, {
      limit: flags.limit,
      group: flags.group,
      timeout: timeoutMs,
      signal: ctx.signal,
    });
  } catch (e) {
    if (ctx.signal.aborted) return [];
    throw e;
  }
}

async function printBlocks(ctx: Ctx, messages: MessageJson[]): Promise<void> {
  if (!messages.length) return;
  await ctx.out.print(messages.map((m) => messageBlock(m, ctx.out.paint)).join("\n\n"));
}

function waitAdvice(flags: ConsumeFlags): string {
  return flags.wait ? "" : "; publish first, or wait for one with --wait 30s";
}

/** Acks what was printed; ids the broker no longer holds are a refusal. */
async function ackAll(
  ctx: Ctx,
  topic: string,
  messages: MessageJson[],
  group?: string,
): Promise<void> {
  const answer = await ctx.ferry.ackMany(topic, messages.map((m) => m.id), { group });
  if (answer.not_found.length) {
    throw refused(
      `Cannot ack ${count(answer.not_found.length, "message")} in "${topic}": their lease ` +
        `ran out before the ack; they will be delivered again`,
    );
  }
}

/** `ferry ack <topic> <id>…`: ids not in flight are reported and exit 1. */
export async function ack(
  ctx: Ctx,
  topic: string,
  ids: string[],
  flags: { group?: string },
): Promise<void> {
  const answer = await ctx.ferry.ackMany(topic, ids, { group: flags.group });
  if (ctx.out.json) await ctx.out.document(answer);
  else if (answer.acked) await ctx.out.print(`Acked ${count(answer.acked, "message")}`);
  if (answer.not_found.length) {
    const where = flags.group ? `"${topic}" group "${flags.group}"` : `"${topic}"`;
    throw refused(
      `Not in flight in ${where}: ${answer.not_found.join(", ")}; check the topic, --group ` +
        `and the id (a lease that ran out puts a message back)`,
    );
  }
}

/** `ferry requeue <topic> <id>`: one more attempt, or the DLQ after the third. */
export async function requeue(
  ctx: Ctx,
  topic: string,
  id: string,
  flags: { reason?: string; delay?: string; group?: string },
): Promise<void> {
  const answer = await ctx.ferry.requeue({ id, topic }, {
    reason: flags.reason,
    delay: flags.delay,
    group: flags.group,
  });
  if (ctx.out.json) return await ctx.out.document(answer);
  const p = ctx.out.paint;
  await ctx.out.print(
    answer.status === "dead_lettered"
      ? `${p.yellow("Dead-lettered")} ${p.cyan(id)} to "${shown(answer.queue)}" after ${
        count(answer.retry_count, "retry", "retries")
      }`
      : `Requeued ${p.cyan(id)} in "${shown(answer.queue)}" (retry ${answer.retry_count})`,
  );
}

/** `ferry peek <topic>`: up to 10 messages, nothing taken. */
export async function peek(ctx: Ctx, topic: string): Promise<void> {
  const messages = await ctx.ferry.peek(topic);
  if (ctx.out.json) return await ctx.out.document(messages);
  if (!messages.length) return await ctx.out.print(`No messages in "${topic}"`);
  await printBlocks(ctx, messages);
}
