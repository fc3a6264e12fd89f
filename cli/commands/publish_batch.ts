/**
 * `ferry publish <topic> --batch FILE`: each line of an NDJSON file (or stdin, `-`) is one
 * message in the wire form of POST /publish/{topic}/batch (`payload` in Base64 or
 * `payload_text`, and `ttl`, `delay`, `priority`, `idempotency_key`, `headers`,
 * `content_type`), sent 1,000 a request; each request is stored all or nothing.
 */

import { resolve } from "node:path";
import type { BatchMessage } from "../../clients/ts/mod.ts";
import {
  BATCH_MESSAGE_FIELDS,
  type BatchPublishMessage,
  type Priority,
  type PublishAnswer,
} from "../../protocol/wire.ts";
import type { Ctx } from "../context.ts";
import { explain } from "../explain.ts";
import { CliFailure, usage } from "../failure.ts";
import { count } from "../format.ts";

/** The flags of `publish` that --batch reads (PublishFlags has them). */
export interface BatchFlags {
  ttl?: string;
  delay?: string;
  priority?: Priority;
  key?: string;
  header: [string, string][];
  broadcast?: boolean;
}

/** Messages one request carries (the broker's limit). */
const PER_REQUEST = 1000;

/** One line of the file as a message; `defaults` are the command's own flags. */
function lineMessage(text: string, line: number, defaults: Partial<BatchMessage>): BatchMessage {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw usage(`Line ${line}: not JSON: ${(e as Error).message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) {
    throw usage(`Line ${line}: expected a JSON object like {"payload_text":"…"}`);
  }
  const o = v as BatchPublishMessage & Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!BATCH_MESSAGE_FIELDS.has(k)) throw usage(`Line ${line}: unknown field "${k}"`);
  }
  let payload: string | Uint8Array;
  if (typeof o.payload_text === "string" && o.payload === undefined) payload = o.payload_text;
  else if (typeof o.payload === "string" && o.payload_text === undefined) {
    try {
      payload = Uint8Array.fromBase64(o.payload);
    } catch {
      throw usage(`Line ${line}: "payload" is not Base64`);
    }
  } else throw usage(`Line ${line}: give "payload" (Base64) or "payload_text", one of them`);
  return {
    payload,
    ttl: o.ttl ?? defaults.ttl,
    delay: o.delay ?? defaults.delay,
    priority: (o.priority ?? defaults.priority) as Priority | undefined,
    idempotencyKey: o.idempotency_key,
    headers: o.headers || defaults.headers
      ? { ...defaults.headers, ...o.headers as Record<string, string> }
      : undefined,
    contentType: o.content_type,
  };
}

/** Reads the file (or stdin) into messages, each with its line number. */
async function readMessages(
  ctx: Ctx,
  file: string,
  defaults: Partial<BatchMessage>,
): Promise<{ line: number; msg: BatchMessage }[]> {
  let text: string;
  if (file === "-") {
    if (ctx.stdinIsTerminal) ctx.out.notice("reading NDJSON from stdin; end it with Ctrl-D");
    text = await new Response(Deno.stdin.readable).text();
  } else {
    try {
      text = await Deno.readTextFile(resolve(ctx.cwd, file));
    } catch (e) {
      throw usage(`Cannot read "${file}": ${e instanceof Error ? e.message : e}`);
    }
  }
  const out: { line: number; msg: BatchMessage }[] = [];
  text.split("\n").forEach((s, i) => {
    if (s.trim() !== "") out.push({ line: i + 1, msg: lineMessage(s, i + 1, defaults) });
  });
  if (out.length === 0) throw usage(`Nothing to publish: "${file}" has no message lines`);
  return out;
}

/** `ferry publish <topic> --batch FILE`. */
export async function publishBatchFile(
  ctx: Ctx,
  topic: string,
  file: string,
  flags: BatchFlags,
): Promise<void> {
  if (flags.key !== undefined || flags.broadcast) {
    throw usage(
      "--batch takes each message's idempotency_key from its line; no --key or --broadcast",
    );
  }
  const messages = await readMessages(ctx, file, {
    ttl: flags.ttl,
    delay: flags.delay,
    priority: flags.priority,
    headers: flags.header.length ? Object.fromEntries(flags.header) : undefined,
  });
  const done: (PublishAnswer & { line: number })[] = [];
  let failure: CliFailure | undefined;
  for (let i = 0; i < messages.length; i += PER_REQUEST) {
    const chunk = messages.slice(i, i + PER_REQUEST);
    try {
      const answers = await ctx.ferry.publishBatch(topic, chunk.map((m) => m.msg));
      answers.forEach((a, j) => done.push({ line: chunk[j]!.line, ...a }));
    } catch (e) {
      const why = explain(e, ctx.settings.url);
      const lines = `lines ${chunk[0]!.line}-${chunk.at(-1)!.line}`;
      failure = new CliFailure(
        why.exitCode,
        `Cannot publish ${lines} (messages[i] is the i-th of them; none of them stored): ${why.message}`,
      );
      break;
    }
  }
  if (ctx.out.json) await ctx.out.document(done);
  else if (done.length) {
    const dup = done.filter((a) => a.deduplicated).length;
    await ctx.out.print(
      `Published ${count(done.length, "message")} to "${topic}"` +
        (dup ? ` (${dup} deduplicated: their keys were seen, nothing stored)` : ""),
    );
  }
  if (failure) throw failure;
}
