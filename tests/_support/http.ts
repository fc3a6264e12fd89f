/**
 * Test support: requests to a running broker (in this process or a child) and checks of its
 * answers. Every call reads its body (Deno's leak checker wants that); the messaging helpers
 * assert the status they expect, so a test reads as the steps it takes.
 */

import type { MessageJson, QueueItem } from "../../protocol/wire.ts";
import { assert, assertEquals, assertMatch } from "./assert.ts";

/** Parsed JSON of a response; tests poke at its fields freely. */
// deno-lint-ignore no-explicit-any
export type Json = any;

/** A broker to talk to: its base URL, or anything that has one (a test broker, a child). */
export type Target = string | { url: string };

/** A message id: a UUIDv7. */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** A timestamp as the broker writes it: ISO 8601 in UTC. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function urlOf(target: Target): string {
  return typeof target === "string" ? target : target.url;
}

/** One finished HTTP exchange, body already read. */
export interface Res {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: Json;
}

export interface CallInit {
  /** Raw request body. */
  body?: BodyInit;
  /** JSON request body (sets Content-Type). */
  json?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Sends one request and reads the whole answer. */
export async function call(
  target: Target,
  method: string,
  path: string,
  init: CallInit = {},
): Promise<Res> {
  const headers = new Headers(init.headers);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  const res = await fetch(urlOf(target) + path, { method, headers, body, signal: init.signal });
  const text = await res.text();
  let parsed: Json = undefined;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/** Reads a JSON body; throws with the status and body text when it is not JSON. */
export async function json<T = Json>(res: Response): Promise<T> {
  const body = await res.text();
  try {
    return JSON.parse(body) as T;
  } catch {
    throw new Error(`expected JSON from ${res.url} (${res.status}), got: ${body.slice(0, 300)}`);
  }
}

/**
 * Lets requests already sent reach the broker: a few round trips on other connections.
 * Used before publishing to parked long-polls, in place of a sleep.
 */
export async function settle(target: Target, rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await call(target, "GET", "/healthz");
}

/** Asserts an RFC 9457 problem answer with the contract's fields, status and code. */
export function assertProblem(res: Res, status: number, code?: string): void {
  const what = `${status} ${code ?? ""} expected, got ${res.status}: ${res.text}`;
  assertEquals(res.status, status, what);
  assertMatch(res.headers.get("content-type") ?? "", /^application\/problem\+json/, what);
  const b = res.body;
  assert(b && typeof b === "object", what);
  assertEquals(typeof b.type, "string", what);
  assertEquals(typeof b.title, "string", what);
  assertEquals(b.status, status, what);
  assertEquals(typeof b.detail, "string", what);
  assertEquals(typeof b.code, "string", what);
  assert(typeof b.request_id === "string" && b.request_id !== "", what);
  assert(res.headers.get("x-request-id"), `X-Request-Id missing: ${what}`);
  if (code !== undefined) assertEquals(b.code, code, what);
}

/** Asserts a 4xx problem answer whatever its exact code. */
export function assertClientError(res: Res, status = 400): void {
  assertProblem(res, status);
}

/** Publishes text or bytes; the answer, whatever its status. */
export function tryPublish(
  target: Target,
  topic: string,
  body: BodyInit,
  query = "",
  headers?: Record<string, string>,
): Promise<Res> {
  return call(target, "POST", `/publish/${topic}${query ? "?" + query : ""}`, { body, headers });
}

/** Publishes text or bytes and asserts 201; returns the answer body. */
export async function publish(
  target: Target,
  topic: string,
  body: BodyInit,
  query = "",
  headers?: Record<string, string>,
): Promise<Json> {
  const res = await tryPublish(target, topic, body, query, headers);
  assertEquals(res.status, 201, res.text);
  return res.body;
}

/** Consumes once and asserts 200; returns the Message (or array with limit>1). */
export async function consume(target: Target, topic: string, query = ""): Promise<Json> {
  const res = await call(target, "GET", `/consume/${topic}${query ? "?" + query : ""}`);
  assertEquals(res.status, 200, res.text);
  return res.body;
}

/** Consumes with `query`: [] when there is nothing (404), else the messages as a list. */
export async function consumeList(
  target: Target,
  topic: string,
  query: string,
): Promise<MessageJson[]> {
  const res = await call(target, "GET", `/consume/${topic}?${query}`);
  if (res.status === 404) return [];
  assertEquals(res.status, 200, `consume ${topic}?${query}: ${res.text}`);
  return Array.isArray(res.body) ? res.body : [res.body];
}

/** Takes every available message of `topic` (bounded), with `extra` query parameters. */
export async function drain(target: Target, topic: string, extra: string): Promise<MessageJson[]> {
  const out: MessageJson[] = [];
  for (let i = 0; i < 1_000; i++) {
    const got = await consumeList(target, topic, `limit=1000&${extra}`);
    if (got.length === 0) return out;
    out.push(...got);
  }
  throw new Error(`drain of ${topic} did not end after 1,000 calls`);
}

/** Asserts the topic (or group) has nothing to deliver right now. */
export async function assertEmpty(target: Target, topic: string, query = ""): Promise<void> {
  const res = await call(target, "GET", `/consume/${topic}${query ? "?" + query : ""}`);
  assertProblem(res, 404, "queue_empty");
}

/** Requeues a consumed message and asserts 200; returns the answer. */
export async function requeue(target: Target, msg: unknown, query = ""): Promise<Json> {
  const res = await call(target, "POST", `/requeue${query ? "?" + query : ""}`, { json: msg });
  assertEquals(res.status, 200, res.text);
  return res.body;
}

/** Publishes one message and requeues it until it is dead-lettered; returns its id. */
export async function deadLetter(target: Target, topic: string, text: string): Promise<string> {
  const p = await publish(target, topic, text);
  for (let i = 1; i <= 3; i++) {
    const m = await consume(target, topic);
    assertEquals(m.id, p.id);
    const r = await requeue(target, m);
    assertEquals(r.status, i < 3 ? "requeued" : "dead_lettered");
  }
  return p.id;
}

/** One item of GET /api/queues, as the route builds it. */
export type { QueueItem };

/** GET /api/queues, by name (accepts an array or `{queues:[...]}`). */
export async function queues(target: Target): Promise<Map<string, QueueItem>> {
  const res = await call(target, "GET", "/api/queues");
  assertEquals(res.status, 200, `GET /api/queues: ${res.text}`);
  const list: QueueItem[] = Array.isArray(res.body) ? res.body : res.body.queues;
  return new Map(list.map((q) => [q.name, q]));
}

/** Decodes standard Base64. */
export function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** Text of a consumed message, from its Base64 payload. */
export function textOf(msg: { payload: string }): string {
  return new TextDecoder().decode(fromBase64(msg.payload));
}

/** One HTTP answer read off a raw socket. */
export interface RawRes {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/**
 * Sends `request` as-is on a new TCP connection (for what fetch cannot send: a bad Host, a body
 * that stops half-way) and reads one answer. `whileOpen` runs after the bytes are sent and
 * before the answer is read.
 */
export async function rawRequest(
  base: string,
  request: string,
  whileOpen?: () => void | Promise<void>,
): Promise<RawRes> {
  const port = Number(new URL(base).port);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(new TextEncoder().encode(request));
    await whileOpen?.();
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(64 * 1024);
    const text = () => new TextDecoder().decode(buf);
    let headEnd = -1;
    let length = 0;
    while (true) {
      if (headEnd < 0) headEnd = text().indexOf("\r\n\r\n");
      if (headEnd >= 0) {
        length = Number(/\r\ncontent-length: *(\d+)/i.exec(text().slice(0, headEnd))?.[1] ?? 0);
        if (buf.length >= headEnd + 4 + length) break;
      }
      const n = await conn.read(chunk);
      if (n === null) break;
      const next = new Uint8Array(buf.length + n);
      next.set(buf);
      next.set(chunk.subarray(0, n), buf.length);
      buf = next;
    }
    const all = text();
    const [statusLine = "", ...lines] = all.slice(0, headEnd < 0 ? all.length : headEnd)
      .split("\r\n");
    const headers = new Map<string, string>();
    for (const l of lines) {
      const i = l.indexOf(":");
      if (i > 0) headers.set(l.slice(0, i).toLowerCase(), l.slice(i + 1).trim());
    }
    return {
      status: Number(statusLine.split(" ")[1] ?? 0),
      headers,
      body: headEnd < 0 ? "" : all.slice(headEnd + 4, headEnd + 4 + length),
    };
  } finally {
    conn.close();
  }
}

/** Asserts a raw answer is an RFC 9457 problem with `status` and `code`, and an X-Request-Id. */
export function assertRawProblem(res: RawRes, status: number, code: string): void {
  const what = `${status} ${code} expected, got ${res.status}: ${res.body}`;
  assertEquals(res.status, status, what);
  assertMatch(res.headers.get("content-type") ?? "", /^application\/problem\+json/, what);
  assertEquals(JSON.parse(res.body).code, code, what);
  assert(res.headers.get("x-request-id"), `X-Request-Id missing: ${what}`);
}

/** A fetch that counts the requests it sends. */
export function counting(): { n: number; fetch: typeof fetch } {
  const counter = {
    n: 0,
    fetch: (i: RequestInfo | URL, init?: RequestInit) => (counter.n++, fetch(i, init)),
  };
  return counter;
}
