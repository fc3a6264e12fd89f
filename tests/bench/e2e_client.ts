/**
 * The two sides of the end-to-end latency section of `tests/bench/load.ts`, each run as its
 * own process so neither one's work delays the other's timing. Both speak HTTP/1.1 over their
 * own keep-alive connections (tests/bench/raw_http.ts): with `fetch`, one poll cost the consumer
 * about a millisecond, and with `limit=1` the clients alone kept even the durable queue ceiling
 * (tests/bench/ceiling_queue.ts) from keeping up with 2,000 msg/s (p50 3.2 s; 1.6 ms raw).
 *
 *   deno run -A tests/bench/e2e_client.ts pub URL TOPIC RATE WARM_S RUN_S
 *     publishes RATE msg/s for WARM_S + RUN_S seconds over 64 connections (at most 64 in
 *     flight; max_lag_ms says how far it fell behind the schedule); each 1 KiB body is JSON
 *     {"t":<send time, ms since the epoch>,"w":<1 while warming up>,"p":"xxx…"}.
 *   deno run -A tests/bench/e2e_client.ts sub URL TOPIC EXPECTED DEADLINE_S [LIMIT] [MODE]
 *     long-polls GET /consume/TOPIC?timeout=5s&limit=LIMIT (default 100) until it has EXPECTED
 *     non-warm-up messages or DEADLINE_S passes, and reports receive time minus send time.
 *     MODE `auto` (default) adds auto_ack=true: each answer waits for its ack to be durable.
 *     MODE `ack` acks what it got (POST /ack, one id or a batch) without waiting for the ack
 *     before the next poll, as an at-least-once consumer that acks after its work does.
 *     first_p50_ms and last_p50_ms are the p50 of the first and the last WINDOW messages in
 *     arrival order: a backlog left from the start is shed (or not) between the two.
 *   deno run -A tests/bench/e2e_client.ts sse URL TOPIC STREAMS EXPECTED DEADLINE_S
 *     opens STREAMS event streams (GET /stream/TOPIC) and reads each until it has EXPECTED
 *     non-warm-up messages or DEADLINE_S passes; reports receive minus send time over all.
 *   deno run -A tests/bench/e2e_client.ts ws URL TOPIC STREAMS EXPECTED DEADLINE_S
 *     the same over STREAMS WebSockets (GET /ws), each a spy subscription on TOPIC.
 *   pub takes an optional 6th argument: the payload size in bytes (default 1024).
 *
 * Each prints one JSON line on stdout. Clocks are `performance.timeOrigin + performance.now()`,
 * which agree across processes on one machine.
 */

import { RawHttp, type RawResponse } from "./raw_http.ts";

let payloadBytes = 1024;
/** Publisher connections: publishes in flight at most (a lag beyond them is reported). */
const PUB_CONNS = 64;
const decoder = new TextDecoder();

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function body(warm: boolean): string {
  const head = `{"t":${now()},"w":${warm ? 1 : 0},"p":"`;
  return head + "x".repeat(Math.max(0, payloadBytes - head.length - 2)) + `"}`;
}

/** Messages in each of sub's first and last windows. */
const WINDOW = 1000;

/** Nearest-rank percentile of an ascending array. */
function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p / 100 * sorted.length) - 1))]!;
}

async function pub(url: string, topic: string, rate: number, warmS: number, runS: number) {
  const total = Math.round(rate * (warmS + runS));
  const warmCount = Math.round(rate * warmS);
  const path = `/publish/${topic}`;
  const free = await Promise.all(Array.from({ length: PUB_CONNS }, () => RawHttp.open(url)));
  const all = [...free];
  const inFlight = new Set<Promise<void>>();
  let sent = 0, failed = 0, maxLagMs = 0;
  const start = now();
  const deadline = start + (warmS + runS) * 1000 + 30_000;
  while (sent < total && now() < deadline) {
    const due = Math.min(total, Math.floor((now() - start) * rate / 1000));
    if (due - sent > 1) maxLagMs = Math.max(maxLagMs, (due - sent) * 1000 / rate);
    while (sent < due && free.length) {
      const conn = free.pop()!;
      const p: Promise<void> = conn.request(
        "POST",
        path,
        body(sent < warmCount),
        "application/json",
      )
        .then((res) => {
          if (res.status !== 201) failed++;
          free.push(conn);
        }, () => {
          failed++; // the connection is not reused
        }).finally(() => inFlight.delete(p));
      inFlight.add(p);
      sent++;
    }
    await sleep(1);
  }
  await Promise.all(inFlight);
  for (const c of all) c.close();
  const elapsedS = (now() - start) / 1000;
  console.log(JSON.stringify({ sent, failed, rate: sent / elapsedS, max_lag_ms: maxLagMs }));
}

interface Wire {
  payload_text?: string;
}

interface Consumed extends Wire {
  id: string;
}

async function sub(
  url: string,
  topic: string,
  expected: number,
  deadlineS: number,
  limit: number,
  mode: "auto" | "ack",
) {
  const target = `/consume/${topic}?timeout=5s&limit=${limit}` +
    (mode === "auto" ? "&auto_ack=true" : "");
  const deadline = now() + deadlineS * 1000;
  const latencies: number[] = [];
  let warm = 0, polls = 0, empty = 0, failed = 0, bad = 0, ackFailed = 0;
  let poller = await RawHttp.open(url);
  const acker = await RawHttp.open(url);
  // Acks are written at once and their answers read in order behind them: a consumer that acks
  // after its work, without waiting for the ack before its next poll.
  let acksRead: Promise<void> = Promise.resolve();
  const ack = (got: Consumed[]) => {
    const sent = got.length === 1 ? acker.send("POST", `/ack/${topic}/${got[0]!.id}`) : acker.send(
      "POST",
      `/ack/${topic}`,
      JSON.stringify({ ids: got.map((m) => m.id) }),
      "application/json",
    );
    sent.catch(() => {});
    acksRead = acksRead.then(() => acker.next()).then((r) => {
      if (r.status >= 300) ackFailed++;
    }, () => void ackFailed++);
  };
  while (latencies.length < expected && now() < deadline) {
    polls++;
    let res: RawResponse;
    try {
      res = await poller.request("GET", target);
    } catch {
      failed++;
      poller.close();
      await sleep(10);
      poller = await RawHttp.open(url);
      continue;
    }
    if (res.status === 404) {
      empty++;
      continue;
    }
    if (res.status !== 200) {
      failed++;
      await sleep(10);
      continue;
    }
    const answer = JSON.parse(decoder.decode(res.body)) as Consumed | Consumed[];
    const at = now();
    const got = Array.isArray(answer) ? answer : [answer];
    if (mode === "ack") ack(got);
    for (const m of got) {
      try {
        const { t, w } = JSON.parse(m.payload_text ?? "") as { t: number; w: number };
        if (w) warm++;
        else latencies.push(at - t);
      } catch {
        bad++;
      }
    }
  }
  await acksRead;
  poller.close();
  acker.close();
  const windowP50 = (w: number[]) => percentile(w.sort((a, b) => a - b), 50);
  const firstP50 = windowP50(latencies.slice(0, WINDOW));
  const lastP50 = windowP50(latencies.slice(-WINDOW));
  latencies.sort((a, b) => a - b);
  console.log(JSON.stringify({
    received: latencies.length,
    warm,
    polls,
    empty,
    failed,
    bad,
    ack_failed: ackFailed,
    p50_ms: percentile(latencies, 50),
    p90_ms: percentile(latencies, 90),
    p99_ms: percentile(latencies, 99),
    max_ms: latencies.at(-1) ?? NaN,
    first_p50_ms: firstP50,
    last_p50_ms: lastP50,
  }));
}

/** The send time and warm-up flag inside an event's payload_text (JSON-escaped there). */
const STAMP = /\\"t\\":([\d.]+),\\"w\\":(\d)/g;

/**
 * Reads STREAMS connections over raw TCP (fetch's body streams cost more per event than the
 * broker does, and the reader would measure itself). Each connection sends `request`, then, once
 * the response head has arrived, `afterHead` (a WebSocket's subscribe frame); every read is
 * scanned for the send-time stamps in the payloads, whatever the event, frame and chunk
 * boundaries. Prints one JSON line.
 */
async function readStamps(
  url: string,
  streams: number,
  expected: number,
  deadlineS: number,
  request: string,
  afterHead?: Uint8Array,
) {
  const latencies: number[] = [];
  let warm = 0, failed = 0, complete = 0;
  const { hostname, port } = new URL(url);
  const deadline = now() + deadlineS * 1000;
  const head = new TextEncoder().encode(request);
  const one = async () => {
    let got = 0, tail = "", started = !afterHead;
    const conn = await Deno.connect({ hostname, port: Number(port) });
    const timer = setTimeout(() => conn.close(), Math.max(0, deadline - now()));
    try {
      await conn.write(head);
      const buf = new Uint8Array(256 * 1024);
      const decoder = new TextDecoder();
      while (got < expected) {
        const n = await conn.read(buf);
        if (n === null) break;
        const at = now();
        const text = tail + decoder.decode(buf.subarray(0, n), { stream: true });
        if (!started && text.includes("\r\n\r\n")) {
          started = true;
          await conn.write(afterHead!);
        }
        STAMP.lastIndex = 0;
        let end = 0;
        for (let m = STAMP.exec(text); m; m = STAMP.exec(text)) {
          end = STAMP.lastIndex;
          if (m[2] === "1") warm++;
          else {
            latencies.push(at - Number(m[1]));
            got++;
          }
        }
        // A stamp cut by the read boundary is completed by the next read.
        tail = text.slice(Math.max(end, text.length - 64));
      }
      if (got >= expected) complete++;
      else failed++;
    } catch {
      failed++;
    } finally {
      clearTimeout(timer);
      try {
        conn.close();
      } catch { /* closed at the deadline */ }
    }
  };
  await Promise.all(Array.from({ length: streams }, one));
  latencies.sort((a, b) => a - b);
  console.log(JSON.stringify({
    received: latencies.length,
    complete,
    warm,
    failed,
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    max_ms: latencies.at(-1) ?? NaN,
  }));
}

/** A masked client text frame (RFC 6455 §5.2); `text` is short (< 126 bytes). */
function maskedText(text: string): Uint8Array {
  const payload = new TextEncoder().encode(text);
  const mask = crypto.getRandomValues(new Uint8Array(4));
  const out = new Uint8Array(6 + payload.length);
  out[0] = 0x81;
  out[1] = 0x80 | payload.length;
  out.set(mask, 2);
  for (let i = 0; i < payload.length; i++) out[6 + i] = payload[i]! ^ mask[i % 4]!;
  return out;
}

/** SSE fan-out: STREAMS event streams of TOPIC. */
function sse(url: string, topic: string, streams: number, expected: number, deadlineS: number) {
  const { hostname } = new URL(url);
  const request =
    `GET /stream/${topic} HTTP/1.1\r\nHost: ${hostname}\r\nAccept: text/event-stream\r\n\r\n`;
  return readStamps(url, streams, expected, deadlineS, request);
}

/** WS fan-out: STREAMS WebSockets, each a spy subscription on TOPIC. */
function ws(url: string, topic: string, streams: number, expected: number, deadlineS: number) {
  const { hostname } = new URL(url);
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const request = `GET /ws HTTP/1.1\r\nHost: ${hostname}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  const subscribe = maskedText(JSON.stringify({ type: "subscribe", topic }));
  return readStamps(url, streams, expected, deadlineS, request, subscribe);
}

const [role, url, topic, a, b, c, d] = Deno.args;
if (role === "pub" && url && topic) {
  if (d) payloadBytes = Number(d);
  await pub(url, topic, Number(a), Number(b), Number(c));
} else if (role === "sse" && url && topic) {
  await sse(url, topic, Number(a), Number(b), Number(c));
} else if (role === "ws" && url && topic) {
  await ws(url, topic, Number(a), Number(b), Number(c));
} else if (role === "sub" && url && topic) {
  await sub(url, topic, Number(a), Number(b), Number(c ?? 100), d === "ack" ? "ack" : "auto");
} else {
  console.error(
    "usage: e2e_client.ts pub URL TOPIC RATE WARM_S RUN_S [BYTES] | sub URL TOPIC N DEADLINE_S" +
      " [LIMIT] [auto|ack]" +
      " | sse|ws URL TOPIC STREAMS N DEADLINE_S",
  );
  Deno.exit(2);
}
