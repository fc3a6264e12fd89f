/**
 * How the fuzzer talks to the broker: fetch() where fetch can say what a request says, and a raw
 * HTTP/1.1 socket otherwise (Host values, forbidden methods, GET with a body, Content-Length lies,
 * bytes fetch refuses). Also the raw exchange and response parser the framing cases use.
 */

import type { FuzzRequest } from "./generator.ts";

/** A whole answer, body read. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
  via: "fetch" | "raw";
  /** The URL fetch actually requested (after its normalization). */
  url?: string;
}

/** An answer, or why there is none. */
export type Outcome = { answer: Answer } | { error: string; timedOut: boolean };

/** One response read off a raw socket. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** What a raw exchange saw: the responses, and whether the server closed or we gave up. */
export interface Exchange {
  responses: RawResponse[];
  closedByServer: boolean;
  timedOut: boolean;
}

const enc = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/** Sends a request with fetch, or over a raw socket when fetch cannot send it as generated. */
export async function send(port: number, req: FuzzRequest, timeoutMs: number): Promise<Outcome> {
  if (req.raw || req.host !== undefined || req.contentLength !== undefined) {
    return sendRaw(port, req, timeoutMs);
  }
  let request: Request;
  try {
    request = new Request(`http://127.0.0.1:${port}${req.path}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
  } catch {
    req.tags.push("fetch-refused:sent-raw"); // a method, header, URL or body fetch refuses
    return sendRaw(port, req, timeoutMs);
  }
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), req.abortMs ?? timeoutMs);
  try {
    const res = await fetch(request, { signal: ac.signal });
    // An event stream never ends: its status and headers are the answer.
    const body = isStream(res.headers)
      ? (await res.body?.cancel(), new Uint8Array(0))
      : new Uint8Array(await res.arrayBuffer());
    return {
      answer: { status: res.status, headers: res.headers, body, via: "fetch", url: res.url },
    };
  } catch (e) {
    const error = `${(e as Error).name}: ${(e as Error).message}`;
    if (/parse header|Invalid URL/.test(error)) {
      req.tags.push("fetch-refused:sent-raw"); // refused while sending, not by the broker
      return sendRaw(port, req, timeoutMs);
    }
    return { error, timedOut: ac.signal.aborted };
  } finally {
    clearTimeout(timer);
  }
}

/** True for an answer that streams until the client leaves (server-sent events). */
function isStream(headers: Headers): boolean {
  return (headers.get("content-type") ?? "").startsWith("text/event-stream");
}

/** Sends one request byte for byte with `Connection: close` and reads its answer. */
export async function sendRaw(port: number, req: FuzzRequest, timeoutMs: number): Promise<Outcome> {
  const odd = /[^\x21-\x7e]/.exec(req.path)?.[0].charCodeAt(0);
  if (odd !== undefined) {
    const kind = odd === 32 ? "space" : odd < 32 || odd === 127 ? "control" : "non-ascii";
    req.tags.push(`raw:target-has-${kind}`);
  }
  let head = `${req.method} ${req.path} HTTP/1.1\r\n`;
  head += `Host: ${req.host ?? `127.0.0.1:${port}`}\r\n`;
  for (const [k, v] of req.headers) head += `${k}: ${v}\r\n`;
  const length = req.contentLength ?? (req.body ? String(req.body.length) : undefined);
  if (length !== undefined) head += `Content-Length: ${length}\r\n`;
  head += "Connection: close\r\n\r\n";
  const body = req.body ?? new Uint8Array(0);
  const short = req.contentLength !== undefined && Number(req.contentLength) > body.length;
  let ex: Exchange;
  try {
    ex = await exchange(port, [enc.encode(head), body], {
      deadlineMs: req.abortMs ?? timeoutMs,
      methods: [req.method],
      expect: 1,
      closeWrite: short, // the body ends early: say so instead of waiting out the deadline
    });
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}`, timedOut: false };
  }
  const res = ex.responses.find((r) => r.status >= 200) ?? ex.responses[0];
  if (res) return { answer: { ...res, via: "raw" } };
  const why = ex.timedOut ? "no answer before the deadline" : "connection closed without answer";
  return { error: why, timedOut: ex.timedOut };
}

/** Options of one raw exchange. */
export interface ExchangeOptions {
  deadlineMs: number;
  /** Stop once this many final (non-1xx) responses are in. */
  expect?: number;
  /** The request methods in order, so HEAD answers are parsed without a body. */
  methods?: string[];
  /** Shut the write side after sending (the server sees EOF). */
  closeWrite?: boolean;
  /** Wait this long between the parts (a slow client). */
  pauseMs?: number;
}

/** Writes `parts` to a fresh connection and reads responses until done, closed or the deadline. */
export async function exchange(
  port: number,
  parts: Uint8Array[],
  opts: ExchangeOptions,
): Promise<Exchange> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let timedOut = false;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    close();
  }, opts.deadlineMs);
  const writing = (async () => {
    for (const p of parts) {
      if (opts.pauseMs) await new Promise((r) => setTimeout(r, opts.pauseMs));
      for (let off = 0; off < p.length && !closed;) off += await conn.write(p.subarray(off));
    }
    if (opts.closeWrite && !closed) await conn.closeWrite();
  })().catch(() => {/* the server may close before reading everything */});
  let buf = new Uint8Array(0);
  let closedByServer = false;
  const chunk = new Uint8Array(64 * 1024);
  let parsed = parseResponses(buf, opts.methods ?? [], false);
  try {
    while (!closed) {
      const n = await conn.read(chunk);
      if (n === null) {
        closedByServer = true;
        break;
      }
      const next = new Uint8Array(buf.length + n);
      next.set(buf);
      next.set(chunk.subarray(0, n), buf.length);
      buf = next;
      parsed = parseResponses(buf, opts.methods ?? [], false);
      const finals = parsed.filter((r) => r.status >= 200);
      if (opts.expect !== undefined && finals.length >= opts.expect) break;
      if (finals.some((r) => r.headers.get("connection") === "close")) break;
    }
  } catch {
    closedByServer = !timedOut; // a reset
  }
  clearTimeout(timer);
  close();
  await writing;
  if (closedByServer) parsed = parseResponses(buf, opts.methods ?? [], true);
  return { responses: parsed, closedByServer, timedOut };
}

function indexOf(buf: Uint8Array, seq: number[], from: number): number {
  outer: for (let i = from; i <= buf.length - seq.length; i++) {
    for (let j = 0; j < seq.length; j++) if (buf[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

const CRLF = [13, 10];
const CRLFCRLF = [13, 10, 13, 10];

/** Parses the complete responses in `buf`; `eof` lets the last one run to the end of the bytes. */
export function parseResponses(buf: Uint8Array, methods: string[], eof: boolean): RawResponse[] {
  const out: RawResponse[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const headEnd = indexOf(buf, CRLFCRLF, pos);
    if (headEnd < 0) break;
    const lines = latin1.decode(buf.subarray(pos, headEnd)).split("\r\n");
    const m = /^HTTP\/\d\.\d (\d{3})/.exec(lines[0] ?? "");
    if (!m) break;
    const status = Number(m[1]);
    const headers = new Headers();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      try {
        headers.append(line.slice(0, colon), line.slice(colon + 1).trim());
      } catch { /* a header Headers refuses: not ours to judge here */ }
    }
    let start = headEnd + 4;
    const finals = out.filter((r) => r.status >= 200).length;
    const noBody = methods[finals] === "HEAD" || status < 200 || status === 204 ||
      status === 304 || isStream(headers);
    let body: Uint8Array;
    if (noBody) {
      body = new Uint8Array(0);
    } else if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
      const chunks: Uint8Array[] = [];
      for (;;) {
        const lineEnd = indexOf(buf, CRLF, start);
        if (lineEnd < 0) return out;
        const size = parseInt(latin1.decode(buf.subarray(start, lineEnd)), 16);
        if (Number.isNaN(size) || lineEnd + 2 + size + 2 > buf.length) return out;
        chunks.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        start = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      chunks.reduce((at, c) => (body.set(c, at), at + c.length), 0);
    } else if (headers.has("content-length")) {
      const n = Number(headers.get("content-length"));
      if (start + n > buf.length) return out;
      body = buf.slice(start, start + n);
      start += n;
    } else {
      if (!eof) return out;
      body = buf.slice(start);
      start = buf.length;
    }
    out.push({ status, headers, body });
    pos = start;
  }
  return out;
}
