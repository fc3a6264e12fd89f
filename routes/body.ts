/**
 * Request bodies: bounded reads (size, time without progress, time in all) and JSON bodies whose nesting
 * is checked before they are parsed and whose fields are those the route documents.
 */

import { MAX_JSON_BODY_BYTES } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { type Accepts, checkFields } from "./accepts.ts";

/** How long a body may go without a byte before its read is cancelled (nginx: 60s). */
export const BODY_STALL_MS = 30_000;
/**
 * How long a whole body may take (Node's `requestTimeout`: 300 s), so a trickle of a byte every
 * few seconds cannot keep a read, and the budget it counts, open for ever.
 */
export const BODY_TOTAL_MS = 300_000;
/** How often the shared timer looks for reads past those bounds while any are under way. */
const BODY_CHECK_MS = 1_000;

/** The bounds in force; tests shorten them (`bodyBounds.stallMs = 200`) and restore them. */
export const bodyBounds = {
  stallMs: BODY_STALL_MS,
  totalMs: BODY_TOTAL_MS,
  checkMs: BODY_CHECK_MS,
};

/** Counts a body's bytes as they arrive (a publish's memory budget); throws to stop the read. */
export interface BodyCounter {
  add(bytes: number): void;
}

interface BodyRead {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  startedAt: number;
  lastProgress: number;
  /** Why the timer cancelled it, once it has. */
  cut: string | undefined;
}

/** Body reads under way. */
const reading = new Set<BodyRead>();
/** The one timer that cuts reads, pending while `reading` is not empty. */
let timer: ReturnType<typeof setTimeout> | undefined;

/**
 * Cancels every body read that has had no byte for `stallMs`, or has taken `totalMs`, by `now`
 * (its request then answers 400). The shared timer calls this; it costs a request nothing.
 */
export function cancelStalledReads(now: number): void {
  const { stallMs, totalMs } = bodyBounds;
  for (const read of reading) {
    if (now - read.lastProgress >= stallMs) {
      read.cut = `no bytes came for ${stallMs / 1000}s`;
    } else if (now - read.startedAt >= totalMs) {
      read.cut = `it took longer than ${totalMs / 1000}s`;
    } else continue;
    reading.delete(read);
    read.reader.cancel().catch(() => {});
  }
}

/** Runs the shared timer's check; again a period later while reads remain. */
function tick(): void {
  timer = undefined;
  cancelStalledReads(performance.now());
  if (reading.size > 0) arm();
}

/** Starts the shared timer, unreferenced: the server keeps the process alive, not a read. */
function arm(): void {
  timer = setTimeout(tick, bodyBounds.checkMs);
  Deno.unrefTimer(timer as unknown as number);
}

/** Adds a read to those the timer watches: one pending timeout, whatever the number of reads. */
function watch(read: BodyRead): void {
  reading.add(read);
  if (timer === undefined) arm();
}

/**
 * The Content-Length a request declares, 0 when it sends none (a chunked body), and 413 when it
 * is larger than `limit`: what a route may count before it reads a byte.
 */
export function declaredLength(req: Request, limit: number): number {
  const declared = req.headers.get("content-length");
  if (declared === null) return 0;
  if (Number(declared) > limit) {
    throw new BrokerError(
      "payload_too_large",
      `Body of ${declared} bytes is larger than the limit of ${limit} bytes`,
    );
  }
  return Number(declared);
}

/**
 * Reads a request body up to `limit` bytes into memory from `alloc` (a payload slab, or a plain
 * buffer by default), each chunk told to `counter` as it arrives. Refuses a larger declared
 * Content-Length at once, and stops reading (413) as soon as the count passes the limit, so a
 * huge body is never buffered; a body that stalls or takes too long is cut (400).
 */
export async function readBody(
  req: Request,
  limit: number,
  alloc: (n: number) => Uint8Array = (n) => new Uint8Array(n),
  counter?: BodyCounter,
): Promise<Uint8Array> {
  declaredLength(req, limit);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const now = performance.now();
  const read: BodyRead = { reader, startedAt: now, lastProgress: now, cut: undefined };
  watch(read);
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (read.cut !== undefined) {
        throw new BrokerError("bad_request", `Cannot read the request body: ${read.cut}`);
      }
      if (done) break;
      read.lastProgress = performance.now();
      total += value.length;
      if (total > limit) {
        throw new BrokerError(
          "payload_too_large",
          `Body is larger than the limit of ${limit} bytes`,
        );
      }
      counter?.add(value.length);
      chunks.push(value);
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    if (e instanceof BrokerError) throw e;
    throw new BrokerError("bad_request", `Cannot read the request body: ${(e as Error).message}`);
  } finally {
    reading.delete(read);
  }
  const out = alloc(total);
  let pos = 0;
  for (const c of chunks) {
    out.set(c, pos);
    pos += c.length;
  }
  return out;
}

/** Bodies this small are read and dropped after a refusal, so the connection can be reused. */
const DISCARD_MAX_BYTES = 64 * 1024;
/** How long a refusal waits for such a body: one on its way comes at once, a stalled one never. */
const DISCARD_WAIT_MS = 100;

/**
 * Reads and drops the small body of a refused request so its connection can be reused, for
 * `DISCARD_WAIT_MS` at most: a body that does not come (a stalled or hostile client) is left,
 * and the connection closes after the answer. It is never counted against the memory budget.
 */
export async function discardBody(req: Request): Promise<void> {
  const declared = req.headers.get("content-length");
  if (declared === null || Number(declared) > DISCARD_MAX_BYTES || !req.body) return;
  const reader = req.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((resolve) => timer = setTimeout(resolve, DISCARD_WAIT_MS));
  const drained = (async () => {
    while (!(await reader.read()).done) { /* dropped */ }
  })().catch(() => {/* client gone */});
  await Promise.race([drained, late]);
  clearTimeout(timer);
  reader.cancel().catch(() => {});
}

/** Deepest nesting a JSON body may have; no control body needs more than a few levels. */
const MAX_JSON_DEPTH = 32;

/**
 * Reads and parses a JSON object body with only the fields the route accepts (its documented
 * body's properties); 400 `bad_request` naming the problem.
 */
export async function readJson(req: Request, accepts: Accepts): Promise<Record<string, unknown>> {
  const body = await readOptionalJson(req, accepts);
  if (!body) throw new BrokerError("empty_body", "Expected a JSON object body");
  return body;
}

/** Like readJson, but an empty body is undefined (for routes where the body is optional). */
export async function readOptionalJson(
  req: Request,
  accepts: Accepts,
): Promise<Record<string, unknown> | undefined> {
  const bytes = await readBody(req, MAX_JSON_BODY_BYTES);
  if (bytes.length === 0) return undefined;
  if (nestedDeeperThan(bytes, MAX_JSON_DEPTH)) {
    throw new BrokerError(
      "bad_request",
      `Malformed JSON body: nested deeper than ${MAX_JSON_DEPTH} levels`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new BrokerError("bad_request", `Malformed JSON body: ${(e as Error).message}`);
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new BrokerError("bad_request", "Expected a JSON object body");
  }
  checkFields(value as Record<string, unknown>, accepts);
  return value as Record<string, unknown>;
}

/**
 * Whether JSON text nests arrays and objects deeper than `max`, found by one pass over the
 * bytes: nothing that later walks the parsed value (messages, checks) can then recurse deeply.
 */
function nestedDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}
