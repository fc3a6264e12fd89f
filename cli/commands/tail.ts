/**
 * `ferry tail <topic> [--filter key=value]`: every message stored in the topic, as it arrives,
 * until Ctrl-C. The client's `stream()` reconnects (1 s doubling to 32 s) and resumes with
 * `Last-Event-ID`, so a broker restart loses and repeats nothing: a broker that stops says so
 * (`event: shutdown`) and tail notes it once on stderr and waits. When messages stored meanwhile
 * have left the topic (`event: reset`), tail says so on stderr.
 */

import { FerryConnectionError, type FerryError } from "../../clients/ts/mod.ts";
import type { Ctx } from "../context.ts";
import { lostBecause } from "../explain.ts";
import { usage } from "../failure.ts";
import { messageBlock } from "../format.ts";

/** `ferry tail <topic>`: prints messages as they are stored, until Ctrl-C. */
export async function tail(ctx: Ctx, topic: string, flags: { filter?: string }): Promise<void> {
  const filter = flags.filter === undefined ? undefined : parseFilter(flags.filter);
  const stop = new AbortController();
  const onInterrupt = () => stop.abort();
  ctx.signal.addEventListener("abort", onInterrupt, { once: true });
  /** A connection was open at some point: later failures are reconnected, not fatal. */
  let connected = false;
  /** The first attempt could not reach the broker: tail ends with exit 3. */
  let unreachable: FerryError | undefined;
  let lost = false;
  const stream = ctx.ferry.stream(topic, {
    filter,
    signal: stop.signal,
    onReset: (reason) => ctx.out.notice(`missed messages of "${topic}": ${reason}`),
    onShutdown: () => {
      connected = true;
      ctx.out.notice("the broker is restarting; reconnecting…");
    },
    onError: (e) => {
      // An open stream that ends or breaks fails otherwise; this is the very first connect.
      if (!connected && e instanceof FerryConnectionError) {
        unreachable = e;
        return stop.abort();
      }
      connected = true;
      lost = true;
      const why = lostBecause(e, ctx.settings.url);
      ctx.out.notice(`lost the stream of "${topic}" (${why}); reconnecting`);
    },
  });
  try {
    for await (const msg of stream) {
      connected = true;
      if (lost) {
        lost = false;
        ctx.out.notice(`stream of "${topic}" is back (event ${stream.lastEventId ?? "-"})`);
      }
      if (ctx.out.json) await ctx.out.line(msg);
      else await ctx.out.print(`${messageBlock(msg, ctx.out.paint)}\n\n`);
    }
  } finally {
    ctx.signal.removeEventListener("abort", onInterrupt);
  }
  if (unreachable) throw unreachable;
}

/** `key=value` (the value's text must equal) or `key` (the key must exist). */
function parseFilter(text: string): { key: string; value?: string } {
  const eq = text.indexOf("=");
  const key = eq < 0 ? text : text.slice(0, eq);
  if (!key) throw usage(`Invalid --filter "${text}": expected key=value or key`);
  return eq < 0 ? { key } : { key, value: text.slice(eq + 1) };
}
