/**
 * GET /stream/{topic}: server-sent events in spy mode, over the broker's durable feed. Each
 * stored message is an `id: <sequence number>` + `data: <Message JSON>` event (a broadcast has no
 * id), nothing is consumed, and a `: ping` comment keeps the connection open. A reconnect with
 * `Last-Event-ID` gets every message stored after that id that the topic still holds, even
 * after a restart (lib/feed.ts), with `event: reset` first when some of them have left
 * the topic. A reader that falls further behind than BROKER_STREAM_BUFFER gets `event: reset`
 * and is closed; drain and SIGTERM end every stream with `event: shutdown`, so that a client
 * waits for the restart and resumes instead of reporting a failure. A key reload (SIGHUP) that
 * revokes the stream's key, or its `consume` scope, ends it with `event: revoked`.
 */

import { feedDelivery, type FeedEvent, filterFn } from "../lib/api.ts";
import { concat } from "../lib/bytes.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import type { Ctx, Route } from "./router.ts";
import { messageText } from "./wire.ts";
import { query, type RouteDoc } from "./route_doc.ts";
import { schemaRef } from "../protocol/schemas.ts";

/** The scope GET /stream needs; a stream whose key loses it ends at the next key reload. */
const SCOPE = "consume";
/** How often an idle stream gets a `: ping` comment (docs/api/sse.md: every 15 s). */
export const PING_MS = 15_000;
/** Events the response body may queue before the feed holds the rest (and, past its bound, resets). */
const QUEUED_EVENTS = 64;
/** Bytes of events gathered into one chunk at most. */
const CHUNK_BYTES = 64 * 1024;

const encoder = new TextEncoder();

/** The last event of a stream the broker ends because it is stopping. */
const SHUTDOWN = event({
  event: "shutdown",
  data: JSON.stringify({ reason: "the broker is stopping" }),
});

/** The data of `event: revoked`: why, and the code a new request with the key would get. */
function revoked(code: string, detail: string): string {
  return JSON.stringify({ reason: `${detail}: reconnect with a valid key`, code });
}

/** The sequence number a reconnecting reader saw last, if it sent one we can read. */
function lastEventId(req: Request, ctx: Ctx): number | undefined | "unreadable" {
  const given = req.headers.get("last-event-id") ?? ctx.query.str("last_event_id");
  if (given === null || given === undefined || given === "") return undefined;
  return /^\d{1,15}$/.test(given) ? Number(given) : "unreadable";
}

/** One SSE event as bytes. */
function event(fields: { id?: number; event?: string; data: string }): Uint8Array {
  let text = "";
  if (fields.id !== undefined) text += `id: ${fields.id}\n`;
  if (fields.event) text += `event: ${fields.event}\n`;
  return encoder.encode(`${text}data: ${fields.data}\n\n`);
}

/**
 * The event of a message as bytes, built once however many streams send it: every subscriber of
 * a topic is handed the same event object.
 */
const built = new WeakMap<FeedEvent, Uint8Array>();
function encoded(e: FeedEvent & { kind: "message" | "broadcast" }): Uint8Array {
  let bytes = built.get(e);
  if (!bytes) {
    const data = messageText(feedDelivery(e));
    built.set(e, bytes = event({ id: e.kind === "message" ? e.seq : undefined, data }));
  }
  return bytes;
}

/** The routes, with the ping interval a test may shorten. */
export function streamRoutes(opts: { pingMs?: number } = {}): Route[] {
  const pingMs = opts.pingMs ?? PING_MS;

  function stream(req: Request, ctx: Ctx): Response {
    const topic = checkName(ctx.params.topic ?? "", "topic");
    const filterKey = ctx.query.str("filter_key") || undefined;
    const filterVal = ctx.query.str("filter_val") || undefined;
    if (filterVal !== undefined && !filterKey) {
      throw new BrokerError("invalid_parameter", "filter_val needs filter_key");
    }
    const filter = filterKey ? filterFn(filterKey, filterVal) : undefined;
    const last = lastEventId(req, ctx);
    let unsubscribe = () => {};
    let unwatch = () => {};
    let ping: ReturnType<typeof setInterval> | undefined;
    let resume: (() => void) | undefined;
    let open = true;

    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        // Events of one turn go out as one chunk: one write for a batch, not one per event.
        let pending: Uint8Array[] = [];
        let pendingBytes = 0;
        const flush = () => {
          if (!pending.length) return;
          const chunk = concat(pending, pendingBytes);
          pending = [];
          pendingBytes = 0;
          if (open) controller.enqueue(chunk);
        };
        const end = () => {
          if (!open) return;
          flush();
          open = false;
          clearInterval(ping);
          unsubscribe();
          unwatch();
          resume?.();
          controller.close();
        };
        const send = (bytes: Uint8Array): void | Promise<void> => {
          if (!open) return;
          if (!pending.length) queueMicrotask(flush);
          pending.push(bytes);
          pendingBytes += bytes.length;
          if (pending.length < QUEUED_EVENTS && pendingBytes < CHUNK_BYTES) return;
          flush();
          // A full queue holds the feed's next events for this reader (its queue is bounded).
          if ((controller.desiredSize ?? 1) <= 0) return new Promise((r) => resume = r);
        };
        const reset = (reason: string, missed?: number) =>
          send(event({ event: "reset", data: JSON.stringify({ reason, missed }) }));
        const listen = (e: FeedEvent): void | Promise<void> => {
          switch (e.kind) {
            case "message":
            case "broadcast": {
              if (filter && !filter(e.msg.readPayload())) return;
              let bytes: Uint8Array;
              try {
                bytes = encoded(e);
              } catch {
                return reset("a message could no longer be read; data was missed");
              }
              return send(bytes);
            }
            case "gap":
              return e.missed === undefined
                ? reset(`messages after ${e.afterSeq} are no longer held; data was missed`)
                : reset(
                  `${e.missed} message${e.missed === 1 ? "" : "s"} after ${e.afterSeq} ` +
                    `no longer held; data was missed`,
                  e.missed,
                );
            case "dropped":
              flush();
              if (open) {
                controller.enqueue(
                  event({ event: "reset", data: JSON.stringify({ reason: e.reason }) }),
                );
              }
              return end();
            case "closed":
              flush();
              if (open) controller.enqueue(SHUTDOWN);
              return end();
          }
        };
        if (last === "unreadable") reset("Last-Event-ID is not a sequence number");
        unsubscribe = ctx.broker.feed.subscribe(topic, listen, {
          afterSeq: typeof last === "number" ? last : undefined,
        });
        const caller = ctx.caller;
        if (caller && ctx.streams) {
          unwatch = ctx.streams.add({
            digest: caller.digest,
            scope: SCOPE,
            end: ({ code, detail }) => {
              flush();
              if (open) {
                controller.enqueue(event({ event: "revoked", data: revoked(code, detail) }));
              }
              end();
            },
          });
        }
        ping = setInterval(() => {
          if (open && (controller.desiredSize ?? 1) > 0) controller.enqueue(PING);
        }, pingMs);
      },
      pull() {
        const r = resume;
        resume = undefined;
        r?.();
      },
      cancel() {
        open = false;
        clearInterval(ping);
        unsubscribe();
        unwatch();
        resume?.();
      },
    }, new CountQueuingStrategy({ highWaterMark: QUEUED_EVENTS }));

    return new Response(body, {
      headers: {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
      },
    });
  }

  return [
    {
      method: "GET",
      pattern: "/stream/:topic",
      shard: { topic: ["param:topic"] },
      cluster: "local",
      scope: SCOPE,
      handler: stream,
      doc: STREAM_DOC,
    },
  ];
}

/**
 * One event of the stream, its `data:` line parsed as JSON: a stored message (`id:` its sequence
 * number in the topic), a broadcast (no `id:`), `event: reset` or `event: shutdown`. OpenAPI 3.1
 * cannot describe the items of a stream (3.2's `itemSchema` will), so `x-ferry-event` carries
 * this schema.
 */
export const SSE_EVENT = {
  oneOf: [
    {
      type: "object",
      title: "message",
      properties: {
        id: { type: "string", pattern: "^[0-9]+$", description: "Absent for a broadcast." },
        data: schemaRef("Message"),
      },
      required: ["data"],
    },
    {
      type: "object",
      title: "reset",
      description: "Messages were missed: the reader fell behind (the stream then ends), or " +
        "messages stored after `Last-Event-ID` have left the topic (acked by every group, " +
        "expired, dropped, purged); what it still holds follows.",
      properties: {
        event: { const: "reset" },
        data: {
          type: "object",
          properties: {
            reason: { type: "string" },
            missed: {
              type: "integer",
              minimum: 1,
              description: "How many messages after `Last-Event-ID` left; absent when unknown.",
            },
          },
          required: ["reason"],
        },
      },
      required: ["event", "data"],
    },
    {
      type: "object",
      title: "revoked",
      description: "The last event when a key reload (SIGHUP) revoked the stream's API key or " +
        "its `consume` scope; a reconnect with that key is refused (401 or 403).",
      properties: {
        event: { const: "revoked" },
        data: {
          type: "object",
          properties: {
            reason: { type: "string" },
            code: { enum: ["unauthorized", "forbidden"] },
          },
          required: ["reason", "code"],
        },
      },
      required: ["event", "data"],
    },
    {
      type: "object",
      title: "shutdown",
      description: "The last event when the broker is stopping (drain, SIGTERM): reconnect " +
        "with `Last-Event-ID` once it is back; nothing was missed.",
      properties: {
        event: { const: "shutdown" },
        data: {
          type: "object",
          properties: { reason: { type: "string" } },
          required: ["reason"],
        },
      },
      required: ["event", "data"],
    },
  ],
};

const STREAM_DOC: RouteDoc = {
  operationId: "stream",
  summary: "Stream a topic (server-sent events)",
  description: "A live, read-only copy of every message stored in the topic (publishes, " +
    "dead-letter moves, redrives) and of broadcasts; nothing is consumed. Each event is an " +
    "`id:` line (the message's sequence number), `data: <Message JSON>` and a blank line; a " +
    "`: ping` comment comes every 15 s. A reconnect with `Last-Event-ID` first gets, in order, " +
    "every message stored after that id that the topic still holds (also after a restart), " +
    "then live ones; it starts with `event: reset` (with `missed`, how many, when known) only " +
    "when a message stored after that id has left the topic. A reader too far behind gets " +
    "`event: reset` and is closed. When the broker stops (drain, SIGTERM) every stream ends " +
    "with `event: shutdown`: reconnect with `Last-Event-ID` once it is back. A key reload that " +
    "revokes the stream's key ends it with `event: revoked`. Browsers pass the " +
    "key as `?api_key=`.",
  tag: "Streams",
  params: [
    query("filter_key", "As for consume.", { type: "string" }),
    query("filter_val", "As for consume.", { type: "string" }),
    query("last_event_id", "Resume after this sequence number (as `Last-Event-ID`).", {
      type: "string",
      pattern: "^[0-9]{1,15}$",
    }),
    {
      name: "Last-Event-ID",
      in: "header",
      description: "Resume after this sequence number (EventSource sends it on reconnect).",
      schema: { type: "string", pattern: "^[0-9]{1,15}$" },
    },
  ],
  ok: {
    200: {
      description: "The event stream; it ends with `event: shutdown` on drain or SIGTERM.",
      content: {
        "text/event-stream": {
          schema: { type: "string" },
          example: 'id: 7\ndata: {"id":"0193…","topic":"orders","payload":"aGk=",…}\n\n: ping\n\n',
          "x-ferry-event": SSE_EVENT,
        },
      },
      headers: {
        "Cache-Control": { description: "`no-cache`.", schema: { type: "string" } },
      },
    },
  },
  errors: ["invalid_parameter"],
};

const PING = encoder.encode(": ping\n\n");
