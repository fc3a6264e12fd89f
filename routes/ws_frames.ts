/**
 * The client frames of GET /ws, read and checked: a JSON object with a `type` (subscribe,
 * unsubscribe, ack, requeue) and its fields; anything else is a `bad_request` naming the fault
 * (a frame over MAX_FRAME_BYTES: `payload_too_large`).
 */

import { BrokerError } from "../lib/errors.ts";
import type { WsClientFrame } from "../protocol/wire.ts";

/**
 * Largest client frame read; a larger one gets a `payload_too_large` error frame and the socket
 * is closed with 1009 (docs/api/websocket.md).
 */
export const MAX_FRAME_BYTES = 64 * 1024;
export const MAX_PREFETCH = 1_000;

function badRequest(detail: string): BrokerError {
  return new BrokerError("bad_request", detail);
}

function needString(f: Record<string, unknown>, field: string): string {
  const v = f[field];
  if (typeof v !== "string" || v === "") {
    throw badRequest(`Missing "${field}": a ${String(f.type)} frame needs a non-empty string`);
  }
  return v;
}

function optString(f: Record<string, unknown>, field: string): string | undefined {
  const v = f[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw badRequest(`Invalid "${field}": expected a string`);
  return v;
}

function byteLength(s: string): number {
  // Each UTF-16 unit is 1 to 3 UTF-8 bytes: count only when the length leaves a doubt.
  return s.length * 3 <= MAX_FRAME_BYTES ? s.length : new TextEncoder().encode(s).length;
}

/** Reads one client frame; throws `bad_request` (or `invalid_parameter`) saying what is wrong. */
export function parseFrame(data: unknown): WsClientFrame {
  if (typeof data !== "string") throw badRequest("Binary frames are not read: send JSON text");
  const bytes = data.length > MAX_FRAME_BYTES ? data.length : byteLength(data);
  if (bytes > MAX_FRAME_BYTES) {
    throw new BrokerError(
      "payload_too_large",
      `Frame too large: ${bytes} bytes; at most ${MAX_FRAME_BYTES}`,
    );
  }
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    throw badRequest("Malformed JSON: send one JSON object per text frame");
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) {
    throw badRequest('Expected a JSON object with a "type"');
  }
  const f = v as Record<string, unknown>;
  switch (f.type) {
    case "subscribe": {
      const p = f.prefetch;
      if (
        p !== undefined &&
        !(Number.isInteger(p) && (p as number) >= 1 && (p as number) <= MAX_PREFETCH)
      ) {
        throw new BrokerError(
          "invalid_parameter",
          `Invalid prefetch ${JSON.stringify(p)}: an integer from 1 to ${MAX_PREFETCH}`,
        );
      }
      return {
        type: "subscribe",
        topic: needString(f, "topic"),
        group: optString(f, "group"),
        prefetch: p as number | undefined,
      };
    }
    case "unsubscribe":
      return { type: "unsubscribe", topic: needString(f, "topic") };
    case "ack":
      return { type: "ack", topic: needString(f, "topic"), id: needString(f, "id") };
    case "requeue":
      return {
        type: "requeue",
        topic: needString(f, "topic"),
        id: needString(f, "id"),
        reason: optString(f, "reason"),
      };
    default: {
      const shown = JSON.stringify(f.type ?? null).slice(0, 64);
      throw badRequest(`Unknown frame type ${shown}: use subscribe, unsubscribe, ack or requeue`);
    }
  }
}
