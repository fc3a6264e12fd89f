/**
 * Payloads both ways: what a publish sends for a string, bytes or a JSON value, and the bytes,
 * text or JSON of a received message (its `payload` is Base64).
 */

import type { Message } from "./options.ts";

/** What `publish` takes: text, bytes, or any other value, which is sent as JSON. */
export type PublishBody = string | Uint8Array | ArrayBuffer | ArrayBufferView | unknown;

/** The bytes (or text) to send for a body, and the Content-Type it implies. */
export function encodeBody(body: PublishBody): { data: string | Uint8Array; type: string } {
  if (typeof body === "string") return { data: body, type: "text/plain;charset=utf-8" };
  if (body instanceof Uint8Array) return { data: body, type: "application/octet-stream" };
  if (body instanceof ArrayBuffer) {
    return { data: new Uint8Array(body), type: "application/octet-stream" };
  }
  if (ArrayBuffer.isView(body)) {
    return {
      data: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
      type: "application/octet-stream",
    };
  }
  const json = JSON.stringify(body);
  if (json === undefined) throw new TypeError(`Cannot publish ${typeof body}: not JSON`);
  return { data: json, type: "application/json" };
}

/** Base64 of bytes: `toBase64()` where the platform has it (Deno, new browsers), else `btoa`. */
export function toBase64(bytes: Uint8Array): string {
  const native = (bytes as Uint8Array & { toBase64?: () => string }).toBase64;
  if (typeof native === "function") return native.call(bytes);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/** The payload bytes of a message. */
export function payloadBytes(msg: Pick<Message, "payload">): Uint8Array {
  const bin = atob(msg.payload);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The payload as text (`payload_text` when the broker sent it, else decoded leniently). */
export function payloadText(msg: Pick<Message, "payload" | "payload_text">): string {
  return msg.payload_text ?? new TextDecoder().decode(payloadBytes(msg));
}

/** The payload parsed as JSON; throws a SyntaxError when it is not JSON. */
export function payloadJson<T = unknown>(msg: Pick<Message, "payload" | "payload_text">): T {
  return JSON.parse(payloadText(msg)) as T;
}
