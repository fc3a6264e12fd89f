/**
 * `ferry publish <topic> [data | -f FILE… | -]`: one message from the argument or stdin, or one
 * message per file, in the order given, with a progress bar on a terminal.
 */

import { resolve } from "node:path";
import process from "node:process";
import cliProgress from "cli-progress";
import type { BroadcastAnswer, PublishAnswer } from "../../protocol/wire.ts";
import type { Ctx } from "../context.ts";
import { explain } from "../explain.ts";
import { CliFailure, usage } from "../failure.ts";
import { shown } from "../escape.ts";
import { count, relative, span } from "../format.ts";
import { table } from "../table.ts";
import { publishBatchFile } from "./publish_batch.ts";

/** The flags of `publish`, checked by the parser. */
export interface PublishFlags {
  file?: string[];
  ttl?: string;
  delay?: string;
  priority?: "high" | "normal" | "low";
  key?: string;
  header: [string, string][];
  broadcast?: boolean;
  /** An NDJSON file (or `-`) of messages, one a line (publish_batch.ts). */
  batch?: string;
}

type Answer = PublishAnswer | BroadcastAnswer;

/** Files published at once before the progress bar is worth showing. */
const BAR_FROM_FILES = 2;

/** `ferry publish <topic> [data | -f FILE… | -]`. */
export async function publish(
  ctx: Ctx,
  topic: string,
  data: string | undefined,
  flags: PublishFlags,
): Promise<void> {
  if (flags.batch !== undefined) {
    if (data !== undefined || flags.file?.length) {
      throw usage("Give the messages as --batch FILE, or the data or -f FILE…, not both");
    }
    return await publishBatchFile(ctx, topic, flags.batch, flags);
  }
  if (data !== undefined && flags.file?.length) {
    throw usage("Give the data as an argument, as -f FILE… or as - for stdin, not both");
  }
  const options = {
    ttl: flags.ttl,
    delay: flags.delay,
    priority: flags.priority,
    idempotencyKey: flags.key,
    headers: flags.header.length ? Object.fromEntries(flags.header) : undefined,
    broadcast: flags.broadcast,
  };
  if (flags.file?.length) return await publishFiles(ctx, topic, flags.file, options);
  if (data === undefined) {
    throw usage(`Nothing to publish: give the data, -f FILE… or - to read stdin`);
  }
  const body = data === "-" ? await readStdin(ctx) : data;
  const answer: Answer = await ctx.ferry.publish(topic, body, options);
  if (ctx.out.json) return await ctx.out.document(answer);
  await ctx.out.print(describe(ctx, topic, answer));
}

/** One line for people about a publish answer. */
function describe(ctx: Ctx, topic: string, a: Answer): string {
  const p = ctx.out.paint;
  if ("broadcast" in a) {
    return `Broadcast to ${count(a.delivered_to, "waiting consumer")} of "${topic}"`;
  }
  const extra: string[] = [];
  if (a.deduplicated) extra.push(p.yellow("deduplicated: the key was seen, nothing stored"));
  if (a.priority !== "normal") extra.push(`priority ${a.priority}`);
  if (a.visible_at) extra.push(`visible ${sincePublish(a.timestamp, a.visible_at)}`);
  if (a.expires_at) extra.push(`expires ${sincePublish(a.timestamp, a.expires_at)}`);
  const tail = extra.length ? `  (${extra.join(", ")})` : "";
  return `Published ${p.cyan(shown(a.id))} to "${shown(a.topic)}"${tail}`;
}

/**
 * When `at` comes, counted from the publish's own `timestamp`: `in 2s` for `--delay 2s`. Both
 * times are the broker's, so neither the answer's trip nor a skewed local clock shows.
 */
function sincePublish(timestamp: string, at: string): string {
  const ms = Date.parse(at) - Date.parse(timestamp);
  return Number.isNaN(ms) ? shown(relative(at)) : `in ${span(ms)}`;
}

/** Stdin's bytes: `-` as the data means "read it all". */
async function readStdin(ctx: Ctx): Promise<Uint8Array> {
  if (ctx.stdinIsTerminal) ctx.out.notice("reading the message from stdin; end it with Ctrl-D");
  return new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer());
}

/**
 * Publishes each file as one message, in order, stopping at the first refusal; what was
 * published before it is still reported (in JSON mode as the document's array).
 */
async function publishFiles(
  ctx: Ctx,
  topic: string,
  files: string[],
  options: Parameters<Ctx["ferry"]["publish"]>[2],
): Promise<void> {
  const paths = files.map((f) => resolve(ctx.cwd, f));
  for (const [i, path] of paths.entries()) {
    const info = await Deno.stat(path).catch(() => undefined);
    if (!info?.isFile) {
      throw usage(`Cannot read "${files[i]}": ${info ? "not a file" : "no such file"}`);
    }
  }
  const bar = ctx.stderrIsTerminal && !ctx.out.json && files.length >= BAR_FROM_FILES
    ? new cliProgress.SingleBar({
      stream: process.stderr,
      format: "publishing {bar} {value}/{total} files  {file}",
      hideCursor: true,
      clearOnComplete: true,
    }, cliProgress.Presets.shades_classic)
    : undefined;
  bar?.start(files.length, 0, { file: "" });
  const done: { file: string; answer: Answer }[] = [];
  let failure: CliFailure | undefined;
  try {
    for (const [i, path] of paths.entries()) {
      const file = files[i]!;
      bar?.update(i, { file });
      let body: Uint8Array;
      try {
        body = await Deno.readFile(path);
      } catch (e) {
        throw usage(`Cannot read "${file}": ${e instanceof Error ? e.message : e}`);
      }
      try {
        done.push({ file, answer: await ctx.ferry.publish(topic, body, options) });
      } catch (e) {
        const why = explain(e, ctx.settings.url);
        failure = new CliFailure(why.exitCode, `Cannot publish "${file}": ${why.message}`);
        break;
      }
    }
    bar?.update(done.length);
  } finally {
    bar?.stop();
  }
  if (ctx.out.json) {
    await ctx.out.document(done.map(({ file, answer }) => ({ file, ...answer })));
  } else if (done.length) {
    const p = ctx.out.paint;
    const rows = done.map(({ file, answer }) => [
      file,
      "id" in answer ? p.cyan(shown(answer.id)) : `broadcast to ${answer.delivered_to}`,
      "deduplicated" in answer && answer.deduplicated ? "deduplicated" : "",
    ]);
    await ctx.out.print(table([{ head: "FILE" }, { head: "ID" }, { head: "" }], rows, p));
    await ctx.out.print(`Published ${count(done.length, "file")} to "${topic}"`);
  }
  if (failure) throw failure;
}
