/**
 * Shared helpers of the durability tests: temp dirs, child brokers that are always stopped,
 * parsed log lines, draining a topic over HTTP, and the WAL file of a topic.
 */

import assert from "node:assert/strict";
import { type ChildBroker, spawnBroker } from "../_support/server.ts";

/** One message as consume and peek return it (the fields these tests read). */
export interface WireMessage {
  id: string;
  topic: string;
  payload: string;
  payload_text?: string;
  timestamp: string;
  retry_count: number;
  priority?: string;
  headers?: Record<string, string>;
  expires_at?: string;
  group?: string;
  reason?: string;
}

/** A parsed stderr line of the broker. */
export type LogLine = Record<string, unknown> & { msg?: string; level?: string };

/** Every child started through `start()`, so `cleanup()` can kill what a failed test left. */
const running = new Set<ChildBroker>();

/** Spawns the broker on `dataDir` and remembers it for `cleanup()`. */
export async function start(
  dataDir: string,
  env: Record<string, string> = {},
  args: string[] = [],
  fdLimit?: number,
): Promise<ChildBroker> {
  const child = await spawnBroker({ dataDir, env, args, fdLimit });
  running.add(child);
  return child;
}

/** Sends `signal` and waits for the exit status (bounded: SIGKILL after `graceMs`). */
export async function stop(
  child: ChildBroker,
  signal: Deno.Signal = "SIGKILL",
  graceMs = 10_000,
): Promise<Deno.CommandStatus> {
  child.kill(signal);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((res) => timer = setTimeout(() => res("late"), graceMs));
  const first = await Promise.race([child.exited, late]);
  clearTimeout(timer);
  if (first === "late") child.kill("SIGKILL");
  const status = await child.exited;
  running.delete(child);
  // Let the stderr reader of spawnBroker see the end of the pipe.
  await new Promise((r) => setTimeout(r, 0));
  return status;
}

/** Runs `fn` with a fresh temp dir; kills every child left running and removes the dir. */
export async function withDataDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-durability-" });
  try {
    await fn(dir);
  } finally {
    for (const child of [...running]) await stop(child, "SIGKILL");
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The child's stderr lines that parse as JSON. */
export function logLines(child: ChildBroker): LogLine[] {
  const out: LogLine[] = [];
  for (const line of child.logs) {
    try {
      const rec = JSON.parse(line);
      if (rec && typeof rec === "object") out.push(rec);
    } catch { /* not JSON */ }
  }
  return out;
}

/** The WAL file of `topic` under `dataDir`. */
export function walPath(dataDir: string, topic: string): string {
  return `${dataDir}/${topic}.wal`;
}

/** The payload as text (every payload in these tests is UTF-8). */
export function text(m: WireMessage): string {
  if (typeof m.payload_text === "string") return m.payload_text;
  return new TextDecoder().decode(Uint8Array.from(atob(m.payload), (c) => c.charCodeAt(0)));
}

/** Reads a JSON body; throws with the status and body text when it is not JSON. */
export async function json<T = unknown>(res: Response): Promise<T> {
  const body = await res.text();
  try {
    return JSON.parse(body) as T;
  } catch {
    throw new Error(`expected JSON from ${res.url} (${res.status}), got: ${body.slice(0, 300)}`);
  }
}

/** POSTs raw text to /publish/{topic}; returns status and parsed body. */
export async function publish(
  url: string,
  topic: string,
  payload: string,
  opts: { query?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/publish/${topic}${opts.query ? `?${opts.query}` : ""}`, {
    method: "POST",
    body: payload,
    headers: { "content-type": "text/plain", ...opts.headers },
  });
  return { status: res.status, body: await json<Record<string, unknown>>(res) };
}

/** Consumes with `query`; [] on 404, the messages otherwise (limit>1 answers an array). */
export async function consume(url: string, topic: string, query: string): Promise<WireMessage[]> {
  const res = await fetch(`${url}/consume/${topic}?${query}`);
  if (res.status === 404) {
    await res.body?.cancel();
    return [];
  }
  const body = await json<WireMessage | WireMessage[]>(res);
  assert(res.status === 200, `consume ${topic}?${query} answered ${res.status}`);
  return Array.isArray(body) ? body : [body];
}

/** Takes every available message of `topic` (bounded), with `extra` query parameters. */
export async function drain(url: string, topic: string, extra: string): Promise<WireMessage[]> {
  const out: WireMessage[] = [];
  for (let i = 0; i < 1_000; i++) {
    const got = await consume(url, topic, `limit=1000&${extra}`);
    if (got.length === 0) return out;
    out.push(...got);
  }
  throw new Error(`drain of ${topic} did not end after 1,000 calls`);
}

/** One item of GET /api/queues. */
export interface QueueItem {
  name: string;
  depth: number;
  in_flight: number;
  delayed: number;
  dlq_depth: number;
  groups: unknown;
  policy: string;
  retain: string | null;
  oldest_age_seconds: number;
}

/** GET /api/queues, by name (accepts an array or `{queues:[...]}`). */
export async function queues(url: string): Promise<Map<string, QueueItem>> {
  const res = await fetch(`${url}/api/queues`);
  const body = await json<QueueItem[] | { queues: QueueItem[] }>(res);
  assert(res.status === 200, `GET /api/queues answered ${res.status}`);
  const list = Array.isArray(body) ? body : body.queues;
  return new Map(list.map((q) => [q.name, q]));
}

/** Size of a file, or undefined when it does not exist. */
export async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** A small deterministic PRNG (mulberry32) so a failing run can be repeated from its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
