/**
 * Fetch helpers for the black-box route tests: every call reads its body (Deno's leak checker
 * wants that), a hand-driven clock, and `withBroker` that always closes the broker.
 */

import assert from "node:assert/strict";
import { type InProcessBroker, startBroker } from "../_support/server.ts";
import type { Config } from "../../lib/config.ts";

/** Parsed JSON of a response; tests poke at its fields freely. */
// deno-lint-ignore no-explicit-any
export type Json = any;

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
  base: string,
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
  const res = await fetch(base + path, { method, headers, body, signal: init.signal });
  const text = await res.text();
  let parsed: Json = undefined;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/** Asserts an RFC 9457 problem answer with the contract's fields, status and code. */
export function assertProblem(res: Res, status: number, code?: string): void {
  const what = `${status} ${code ?? ""} expected, got ${res.status}: ${res.text}`;
  assert.equal(res.status, status, what);
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/, what);
  const b = res.body;
  assert(b && typeof b === "object", what);
  assert.equal(typeof b.type, "string", what);
  assert.equal(typeof b.title, "string", what);
  assert.equal(b.status, status, what);
  assert.equal(typeof b.detail, "string", what);
  assert.equal(typeof b.code, "string", what);
  assert(typeof b.request_id === "string" && b.request_id !== "", what);
  assert(res.headers.get("x-request-id"), `X-Request-Id missing: ${what}`);
  if (code !== undefined) assert.equal(b.code, code, what);
}

/** Asserts a 4xx problem answer whatever its exact code. */
export function assertClientError(res: Res, status = 400): void {
  assertProblem(res, status);
}

/** A clock the test moves by hand; the broker reads `fn`. */
export class Clock {
  now = Date.now();
  readonly fn = (): number => this.now;
  advance(ms: number): number {
    this.now += ms;
    return this.now;
  }
}

/** A running broker plus the test's clock and helpers bound to its URL. */
export interface Ctx extends InProcessBroker {
  clock: Clock;
  call(method: string, path: string, init?: CallInit): Promise<Res>;
  /** Starts a request without awaiting it; aborted at the end of the test if still open. */
  start(method: string, path: string, init?: CallInit): Promise<Res>;
  /** Moves the clock on and runs the broker's sweep at the new time. */
  tick(ms: number): Promise<void>;
}

/** Runs `fn` against a fresh broker and always closes it (and aborts open requests). */
export async function withBroker(
  overrides: Partial<Config>,
  fn: (ctx: Ctx) => Promise<void>,
  clock = new Clock(),
): Promise<void> {
  const b = await startBroker(overrides, { clock: clock.fn });
  const ctx = bind(b, clock);
  try {
    await fn(ctx);
  } finally {
    await ctx.abortAll();
    await b.close();
  }
}

/** Binds the helpers to a started broker; `abortAll` ends requests still pending. */
export function bind(b: InProcessBroker, clock: Clock): Ctx & { abortAll(): Promise<void> } {
  const pending = new Set<{ ac: AbortController; p: Promise<unknown> }>();
  return {
    ...b,
    clock,
    call: (method, path, init) => call(b.url, method, path, init),
    start(method, path, init = {}) {
      const ac = new AbortController();
      const p = call(b.url, method, path, { ...init, signal: ac.signal });
      const entry = { ac, p: p.catch(() => {}) };
      pending.add(entry);
      p.finally(() => pending.delete(entry)).catch(() => {});
      return p;
    },
    async tick(ms) {
      await b.broker.sweep(clock.advance(ms));
    },
    async abortAll() {
      for (const e of pending) e.ac.abort();
      await Promise.all([...pending].map((e) => e.p));
    },
  };
}

/**
 * Lets requests already sent reach the broker: a few round trips on other connections.
 * Used before publishing to parked long-polls, in place of a sleep.
 */
export async function settle(base: string, rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await call(base, "GET", "/healthz");
}

/** Publishes text or bytes and asserts 201; returns the answer body. */
export async function publish(
  ctx: Ctx,
  topic: string,
  body: BodyInit,
  query = "",
  headers?: Record<string, string>,
): Promise<Json> {
  const res = await ctx.call("POST", `/publish/${topic}${query ? "?" + query : ""}`, {
    body,
    headers,
  });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** Consumes once and asserts 200; returns the Message (or array with limit>1). */
export async function consume(ctx: Ctx, topic: string, query = ""): Promise<Json> {
  const res = await ctx.call("GET", `/consume/${topic}${query ? "?" + query : ""}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** Asserts the topic (or group) has nothing to deliver right now. */
export async function assertEmpty(ctx: Ctx, topic: string, query = ""): Promise<void> {
  const res = await ctx.call("GET", `/consume/${topic}${query ? "?" + query : ""}`);
  assertProblem(res, 404, "queue_empty");
}

/** Decodes standard Base64. */
export function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** Text of a consumed message, from its Base64 payload. */
export function textOf(msg: Json): string {
  return new TextDecoder().decode(fromBase64(msg.payload));
}

/** True when the path exists. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/** Collects failed checks of a table-driven test, so one run reports every bad case. */
export class Failures {
  readonly list: string[] = [];
  check(label: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.list.push(`${label}: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  /** Fails with every collected case, one per line. */
  assertNone(): void {
    assert.equal(this.list.length, 0, `\n${this.list.join("\n")}`);
  }
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
  assert.equal(res.status, status, what);
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/, what);
  assert.equal(JSON.parse(res.body).code, code, what);
  assert.ok(res.headers.get("x-request-id"), `X-Request-Id missing: ${what}`);
}
