/**
 * Request bodies: bounded reads (size, and time without progress) and JSON bodies whose nesting
 * is checked before they are parsed and whose fields are those the route documents.
 */

import { MAX_JSON_BODY_BYTES } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { type Accepts, checkFields } from "./accepts.ts";

/** How long a body may go without a byte before its read is cancelled (nginx: 60s). */
export const BODY_STALL_MS = 30_000;

interface BodyRead {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  lastProgress: number;
  stalled: boolean;
}

/** Body reads under way. */
const reading = new Set<BodyRead>();

/**
 * Cancels every body read that has had no byte since `now - BODY_STALL_MS` (its request then
 * answers 400). The handler calls this as requests arrive, so no timer runs per request.
 */
export function cancelStalledReads(now: number): void {
  for (const read of reading) {
    if (now - read.lastProgress < BODY_STALL_MS) continue;
    read.stalled = true;
    reading.delete(read);
    read.reader.cancel().catch(() => {});
  }
}

/**
 * Reads a request body up to `limit` bytes into memory from `alloc` (a payload slab, or a plain
 * buffer by default). Refuses a larger declared Content-Length at once, and stops reading (413)
 * as soon as the count passes the limit, so a huge body is never buffered.
 */
export async function readBody(
  req: Request,
  limit: number,
  alloc: (n: number) => Uint8Array = (n) => new Uint8Array(n),
): Promise<Uint8Array> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) {
    throw new BrokerError(
      "payload_too_large",
      `Body of ${declared} bytes is larger than the limit of ${limit} bytes`,
    );
  }
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const read: BodyRead = { reader, lastProgress: performance.now(), stalled: false };
  reading.add(read);
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (read.stalled) {
        throw new BrokerError(
          "bad_request",
          `Cannot read the request body: no bytes came for ${BODY_STALL_MS / 1000}s`,
        );
      }
      if (done) break;
      read.lastProgress = performance.now();
      total += value.length;
      if (total > limit) {
        reader.cancel().catch(() => {});
        throw new BrokerError(
          "payload_too_large",
          `Body is larger than the limit of ${limit} bytes`,
        );
      }
      chunks.push(value);
    }
  } catch (e) {
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
