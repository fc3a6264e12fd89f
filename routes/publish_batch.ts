/**
 * POST /publish/{topic}/batch: many messages in one request, as a JSON array or NDJSON, each
 * with its own payload (Base64 or text) and the options of a single publish. All or nothing:
 * a bad item fails the request with a problem naming its index, and nothing is stored.
 */

import { allocPayload, autoKey, type BatchItem, copyPayload, PRIORITIES } from "../lib/api.ts";
import { isAscii, isUtf8 } from "node:buffer";
import {
  MAX_BATCH_BODY_BYTES,
  MAX_BATCH_MESSAGES,
  MAX_PAYLOAD_BYTES,
  MAX_TIME_MS,
} from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import { schemaRef } from "../protocol/schemas.ts";
import type { BatchPublishMessage } from "../protocol/wire.ts";
import { type Accepts, checkFields } from "./accepts.ts";
import { declaredLength, readBody } from "./body.ts";
import { describe, durationIn, jsonText } from "./http.ts";
import { MAX_HEADER_BYTES, MAX_KEY_LENGTH, PUBLISH_ERRORS } from "./publish.ts";
import { durationSchema, query, type RouteDoc } from "./route_doc.ts";
import type { Ctx, Route } from "./router.ts";
import { batchAnswerText } from "./wire.ts";

/** Media types read as NDJSON (one message object per line); anything else JSON is an array. */
const NDJSON_TYPES = new Set([
  "application/x-ndjson",
  "application/jsonl",
  "application/jsonlines",
]);
/** An HTTP field name (RFC 9110 token) with the X-MQ- prefix, lower-cased. */
const HEADER_NAME = /^x-mq-[!#$%&'*+.^_`|~0-9a-z-]+$/;
/** A field value HTTP can carry (no control characters but tab). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Decodes a body already checked to be UTF-8: 6× cheaper than a fatal decoder (measured). */
const utf8 = new TextDecoder("utf-8");
const encoder = new TextEncoder();
/** Where short payload_text is encoded before it is copied into a slab of its exact size. */
const SCRATCH = new Uint8Array(64 * 1024);

/** Whether the Content-Type says NDJSON; 400 for a type that is neither NDJSON nor JSON. */
function isNdjson(contentType: string | null): boolean {
  if (contentType === null) return false;
  const semi = contentType.indexOf(";");
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (NDJSON_TYPES.has(type)) return true;
  if (type === "" || type === "application/json" || type.endsWith("+json")) return false;
  throw new BrokerError(
    "bad_request",
    `Cannot read a batch sent as ${describe(type)}: send application/json (an array of ` +
      "messages) or application/x-ndjson (one message per line)",
  );
}

function bad(code: "bad_request" | "invalid_parameter", detail: string): BrokerError {
  return new BrokerError(code, detail);
}

/** The message objects of a JSON array body. */
function parseArray(text: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw bad("bad_request", `Malformed JSON body: ${(e as Error).message}`);
  }
  if (!Array.isArray(value)) {
    throw bad("bad_request", `Expected a JSON array of messages, got ${describe(value)}`);
  }
  return value;
}

/** The message objects of an NDJSON body; blank lines are skipped. */
function parseLines(text: string): unknown[] {
  const out: unknown[] = [];
  let line = 0;
  for (let start = 0; start < text.length;) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    line++;
    const s = text.slice(start, end);
    start = end + 1;
    if (s.trim() === "") continue;
    if (out.length === MAX_BATCH_MESSAGES) throw tooMany(`more than ${MAX_BATCH_MESSAGES}`);
    try {
      out.push(JSON.parse(s));
    } catch (e) {
      throw bad(
        "bad_request",
        `messages[${out.length}] (line ${line}): malformed JSON: ${(e as Error).message}`,
      );
    }
  }
  return out;
}

function tooMany(n: string): BrokerError {
  return bad(
    "invalid_parameter",
    `Cannot publish a batch of ${n} messages: at most ${MAX_BATCH_MESSAGES} a request`,
  );
}

function tooLarge(field: string, n: number): BrokerError {
  return new BrokerError(
    "payload_too_large",
    `${field}: ${n} bytes is more than the limit of ${MAX_PAYLOAD_BYTES}`,
  );
}

/** Base64 straight into a payload slab (PLATFORM: decoding is the cost that shows here). */
function base64Payload(s: string, field: string): Uint8Array {
  const len = s.length;
  let pad = 0;
  if (len > 0 && s.charCodeAt(len - 1) === 0x3d) {
    pad = len > 1 && s.charCodeAt(len - 2) === 0x3d ? 2 : 1;
  }
  // Exact for Base64 without whitespace; whitespace only makes it larger.
  const n = Math.floor((len - pad) * 3 / 4);
  try {
    if (n <= MAX_PAYLOAD_BYTES) {
      const out = allocPayload(n);
      const r = out.setFromBase64(s);
      if (r.read === len && r.written === n) return out;
    }
    const exact = Uint8Array.fromBase64(s);
    if (exact.length > MAX_PAYLOAD_BYTES) throw tooLarge(field, exact.length);
    return copyPayload(exact);
  } catch (e) {
    if (e instanceof BrokerError) throw e;
    throw bad("invalid_parameter", `${field}: not valid Base64: ${(e as Error).message}`);
  }
}

/** Text as UTF-8 bytes in a payload slab. */
function textPayload(s: string, field: string): Uint8Array {
  if (s.length * 3 > SCRATCH.length) {
    const bytes = encoder.encode(s);
    if (bytes.length > MAX_PAYLOAD_BYTES) throw tooLarge(field, bytes.length);
    return copyPayload(bytes);
  }
  const { written } = encoder.encodeInto(s, SCRATCH);
  return copyPayload(SCRATCH.subarray(0, written));
}

/** The stored headers of a message object: X-MQ-* names lower-cased, then Content-Type. */
function storedHeaders(v: unknown, contentType: unknown, at: string): string[] | undefined {
  let out: string[] | undefined;
  let bytes = 0;
  if (v !== undefined && v !== null) {
    if (typeof v !== "object" || Array.isArray(v)) {
      throw bad("invalid_parameter", `${at}.headers: expected an object, got ${describe(v)}`);
    }
    out = [];
    for (const [raw, value] of Object.entries(v)) {
      const name = raw.toLowerCase();
      if (!HEADER_NAME.test(name)) {
        throw bad(
          "invalid_parameter",
          `${at}.headers: invalid name ${describe(raw)}: expected X-MQ- and a header name`,
        );
      }
      if (typeof value !== "string" || !HEADER_VALUE.test(value)) {
        throw bad(
          "invalid_parameter",
          `${at}.headers.${raw}: expected a string a header can carry, got ${describe(value)}`,
        );
      }
      for (let j = 0; j < out.length; j += 2) {
        if (out[j] === name) {
          throw bad("invalid_parameter", `${at}.headers: ${describe(raw)} is given twice`);
        }
      }
      out.push(name, value.trim());
      bytes += name.length + value.length;
    }
  }
  if (contentType !== undefined && contentType !== null) {
    if (typeof contentType !== "string" || !HEADER_VALUE.test(contentType)) {
      throw bad(
        "invalid_parameter",
        `${at}.content_type: expected a string a header can carry, got ${describe(contentType)}`,
      );
    }
    (out ??= []).push("content-type", contentType.trim());
    bytes += 12 + contentType.length;
  }
  if (bytes > MAX_HEADER_BYTES) {
    throw bad(
      "invalid_parameter",
      `${at}.headers: ${bytes} bytes; the limit is ${MAX_HEADER_BYTES}`,
    );
  }
  return out;
}

/**
 * One message object of the batch, checked; `i` is its index for the problem's detail. Its
 * fields are those of the documented message schema, as for any JSON body.
 */
function parseItem(v: unknown, i: number, accepts: Accepts): BatchItem {
  const at = `messages[${i}]`;
  if (!v || typeof v !== "object" || Array.isArray(v)) {
    throw bad("invalid_parameter", `${at}: expected a message object, got ${describe(v)}`);
  }
  const o = v as Record<string, unknown>;
  checkFields(o, accepts, at);
  const { payload, payload_text: text } = o;
  let bytes: Uint8Array;
  if (payload !== undefined && payload !== null) {
    if (text !== undefined && text !== null) {
      throw bad("invalid_parameter", `${at}: give payload or payload_text, not both`);
    }
    if (typeof payload !== "string") {
      throw bad(
        "invalid_parameter",
        `${at}.payload: expected Base64 text, got ${describe(payload)}`,
      );
    }
    bytes = base64Payload(payload, `${at}.payload`);
  } else if (typeof text === "string") {
    bytes = textPayload(text, `${at}.payload_text`);
  } else if (text !== undefined && text !== null) {
    throw bad("invalid_parameter", `${at}.payload_text: expected a string, got ${describe(text)}`);
  } else {
    throw bad("invalid_parameter", `${at}: missing payload (Base64) or payload_text`);
  }
  if (bytes.length === 0) {
    throw new BrokerError("empty_body", `${at}: the payload is empty`);
  }
  const item: BatchItem = { payload: bytes };
  if (o.ttl !== undefined && o.ttl !== null) {
    item.ttlMs = durationIn(o.ttl, `${at}.ttl`, MAX_TIME_MS);
  }
  if (o.delay !== undefined && o.delay !== null) {
    item.delayMs = durationIn(o.delay, `${at}.delay`, MAX_TIME_MS);
  }
  if (o.priority !== undefined && o.priority !== null) {
    const p = PRIORITIES.indexOf(o.priority as typeof PRIORITIES[number]);
    if (p < 0) {
      throw bad(
        "invalid_parameter",
        `${at}.priority: invalid ${describe(o.priority)}: expected high, normal or low`,
      );
    }
    item.priority = p;
  }
  const key = o.idempotency_key;
  if (key !== undefined && key !== null) {
    if (typeof key !== "string" || key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw bad(
        "invalid_parameter",
        `${at}.idempotency_key: expected 1-${MAX_KEY_LENGTH} characters, got ${describe(key)}`,
      );
    }
    item.idempotencyKey = key;
  }
  if (o.headers !== undefined || o.content_type !== undefined) {
    item.headers = storedHeaders(o.headers, o.content_type, at);
  }
  return item;
}

async function publishBatch(req: Request, ctx: Ctx): Promise<Response> {
  const { query, params } = ctx;
  const topic = checkName(params.topic ?? "", "topic");
  const ndjson = isNdjson(req.headers.get("content-type"));
  const idem = query.str("idempotency");
  if (idem !== undefined && idem !== "" && idem !== "auto") {
    throw bad("invalid_parameter", `Invalid idempotency "${idem}": the only value is auto`);
  }
  // As for a single publish, the key's limit and the budget come before the body, which counts
  // as it arrives. The count of messages is not known yet: the key is charged one message and
  // the body's length now, and the rest (or back the difference) once the batch is parsed.
  const chunked = !req.headers.has("content-length");
  const declared = declaredLength(req, MAX_BATCH_BODY_BYTES);
  ctx.caller?.admit(1, declared);
  const hold = declared > 0 || chunked ? ctx.broker.reserve(topic, declared) : undefined;
  let body: Uint8Array;
  try {
    body = await readBody(req, MAX_BATCH_BODY_BYTES, undefined, hold);
  } finally {
    hold?.release();
  }
  if (body.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${topic}": the body is empty`);
  }
  if (!isAscii(body) && !isUtf8(body)) {
    throw bad("bad_request", "Cannot read the batch: the body is not valid UTF-8");
  }
  const text = utf8.decode(body);
  const raw = ndjson ? parseLines(text) : parseArray(text);
  if (raw.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${topic}": the batch has no messages`);
  }
  if (raw.length > MAX_BATCH_MESSAGES) throw tooMany(String(raw.length));
  const items: BatchItem[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) items[i] = parseItem(raw[i], i, ctx.accepts);
  if (idem === "auto") {
    await Promise.all(items.map(async (item) => {
      item.idempotencyKey ??= await autoKey(item.payload);
    }));
  }
  let bytes = 0;
  for (const item of items) bytes += item.payload.length;
  ctx.caller?.take(items.length - 1, bytes - declared);
  const results = await ctx.broker.publishBatch(topic, items);
  ctx.metrics.observeBatch(items.length);
  const stored = results.some((r) => !r.deduplicated);
  return jsonText(batchAnswerText(results), stored ? 201 : 200);
}

const MESSAGE_SCHEMA = {
  type: "object",
  description: "One message: `payload` (Base64) or `payload_text` (UTF-8 text), exactly one, " +
    "and the options of a single publish.",
  properties: {
    payload: {
      type: "string",
      contentEncoding: "base64",
      description: `The bytes, Base64; 1 B to ${MAX_PAYLOAD_BYTES / 1024 / 1024} MiB decoded.`,
    },
    payload_text: { type: "string", minLength: 1, description: "The bytes as UTF-8 text." },
    ttl: durationSchema(MAX_TIME_MS),
    delay: durationSchema(MAX_TIME_MS),
    priority: schemaRef("Priority"),
    idempotency_key: {
      type: "string",
      minLength: 1,
      maxLength: MAX_KEY_LENGTH,
      description: "A key seen within 5 minutes (before, or earlier in this batch) answers this " +
        "item with the original id and `deduplicated: true`; it is not stored again.",
    },
    headers: {
      type: "object",
      propertyNames: { pattern: "^[Xx]-[Mm][Qq]-[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
      additionalProperties: { type: "string" },
      description: "Stored headers, as the `X-MQ-*` request headers of a single publish: each " +
        "name starts with `X-MQ-` and is stored lower-cased; " +
        `${MAX_HEADER_BYTES / 1024} KiB of them at most.`,
    },
    content_type: {
      type: "string",
      description: "The Content-Type webhooks POST the payload with (a single publish keeps " +
        "its request's).",
    },
  } satisfies Record<keyof BatchPublishMessage, unknown>, // the fields the CLI checks too
  oneOf: [
    { properties: { payload: true }, required: ["payload"] },
    { properties: { payload_text: true }, required: ["payload_text"] },
  ],
  additionalProperties: false,
};

/**
 * 1000 → "1,000" without `toLocaleString`, whose first call loads ICU: 25 ms of start-up
 * (measured), for one number in a description.
 */
function groupThousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+$)/g, ",");
}

const PUBLISH_BATCH_DOC: RouteDoc = {
  operationId: "publishBatch",
  summary: "Publish many messages",
  description: "Stores up to " + groupThousands(MAX_BATCH_MESSAGES) + " messages in " +
    "one request, in order, all or nothing: a bad item fails the request with a problem whose " +
    "`detail` names its index (`messages[3].payload: …`), and a batch that does not fit the " +
    "topic's caps or the memory budget is refused whole (429), so nothing is stored. Every " +
    "message goes to disk in one WAL batch with one fsync; a 2xx means all are durable. The " +
    "body is a JSON array (`application/json`) or one message object per line " +
    "(`application/x-ndjson`), " + `${MAX_BATCH_BODY_BYTES / 1024 / 1024} MiB at most.`,
  tag: "Messages",
  params: [
    query(
      "idempotency",
      "`auto`: the SHA-256 of each payload is its idempotency key (an item's own " +
        "`idempotency_key` takes precedence).",
      { type: "string", enum: ["auto"] },
    ),
  ],
  body: {
    kind: "json",
    name: "BatchPublishRequest",
    required: true,
    schema: {
      type: "array",
      minItems: 1,
      maxItems: MAX_BATCH_MESSAGES,
      items: MESSAGE_SCHEMA,
    },
    also: {
      "application/x-ndjson": {
        schema: {
          type: "string",
          description: "The same message objects, one JSON object per line; blank lines are " +
            "skipped.",
        },
      },
    },
  },
  ok: {
    201: {
      description: "Stored: one answer per message, in order, as a single publish answers.",
      json: "BatchPublishAnswer",
    },
    200: {
      description: "Every message repeated an idempotency key: nothing was stored.",
      json: "BatchPublishAnswer",
    },
  },
  errors: PUBLISH_ERRORS,
};

export const publishBatchRoutes: Route[] = [
  {
    method: "POST",
    pattern: "/publish/:topic/batch",
    shard: { topic: ["param:topic"], api: true },
    scope: "publish",
    handler: publishBatch,
    doc: PUBLISH_BATCH_DOC,
  },
];
