/**
 * The fuzzer's oracle for one answer (no 5xx; every 4xx an RFC 9457 problem with the contract's
 * fields; X-Request-Id on every broker answer) and the printed forms of a request and an answer,
 * detailed enough to replay by hand.
 */

import type { FuzzRequest } from "./generator.ts";
import type { Answer } from "./http.ts";

/** What one answer shows: fine, a bare 4xx of the HTTP layer, or a broken promise. */
export type Verdict = { kind: "ok" } | { kind: "layer" } | { kind: "violation"; what: string };

const utf8 = new TextDecoder();

/** Judges one answer to one fetch- or raw-sent request. */
export function judge(req: FuzzRequest, a: Answer): Verdict {
  const bad = (what: string): Verdict => ({ kind: "violation", what });
  const rid = a.headers.get("x-request-id");
  if (a.status >= 500) return bad(`${a.status} answer`);
  // Deno's HTTP layer refuses some requests before the broker sees them: no id, no body.
  if (a.status >= 400 && rid === null && a.body.length === 0) return { kind: "layer" };
  if (rid === null) return bad(`${a.status} answer without X-Request-Id`);
  const head = req.method.toUpperCase() === "HEAD";
  const type = a.headers.get("content-type") ?? "";
  if (a.status < 400) {
    if (head || a.body.length === 0 || !type.includes("json")) return { kind: "ok" };
    try {
      JSON.parse(utf8.decode(a.body));
      return { kind: "ok" };
    } catch {
      return bad(`${a.status} answer with Content-Type "${type}" and a body that is not JSON`);
    }
  }
  if (!type.startsWith("application/problem+json")) {
    return bad(`${a.status} answer with Content-Type "${type}", not application/problem+json`);
  }
  if (a.status === 401 && !a.headers.has("www-authenticate")) {
    return bad("401 answer without WWW-Authenticate");
  }
  if (a.status === 429 && !a.headers.has("retry-after")) return bad("429 without Retry-After");
  if (head) return { kind: "ok" };
  let p: Record<string, unknown>;
  try {
    p = JSON.parse(utf8.decode(a.body));
  } catch {
    return bad(`${a.status} problem body is not JSON`);
  }
  if (!p || typeof p !== "object") return bad(`${a.status} problem body is not an object`);
  for (const f of ["type", "title", "detail", "code", "request_id"]) {
    if (typeof p[f] !== "string") return bad(`${a.status} problem body without a string "${f}"`);
  }
  if (p.status !== a.status) return bad(`problem "status" ${p.status} differs from ${a.status}`);
  if (p.request_id !== rid) return bad(`problem "request_id" differs from X-Request-Id`);
  return { kind: "ok" };
}

/** Shortens a string for printing, saying how long it was. */
export function clip(s: string, max = 100): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} chars)`;
}

/** Bytes as a short, escaped text prefix. */
export function bytesPrefix(b: Uint8Array | undefined, max = 120): string {
  if (!b || b.length === 0) return "(none)";
  const text = JSON.stringify(utf8.decode(b.subarray(0, max)));
  return `${b.length} B ${text}${b.length > max ? "…" : ""}`;
}

/** The header list, runs of similar names (x-mq-h0 … x-mq-h139) folded into one line. */
export function headerSummary(headers: [string, string][]): string {
  const lines: string[] = [];
  for (let i = 0; i < headers.length;) {
    const [k, v] = headers[i]!;
    const stem = k.replace(/\d+$/, "");
    let j = i + 1;
    while (j < headers.length && headers[j]![0].replace(/\d+$/, "") === stem && stem !== k) j++;
    if (j - i > 2) {
      lines.push(`${clip(k, 40)} … ${headers[j - 1]![0]} (${j - i} headers of ${v.length} B)`);
    } else {
      for (const [hk, hv] of headers.slice(i, j)) lines.push(`${clip(hk, 60)}: ${clip(hv, 80)}`);
    }
    i = j;
  }
  return lines.length ? lines.join("; ") : "(none)";
}

/** A request as printed in a report: method, path, how it went, headers, body, tags. */
export function describe(req: FuzzRequest): string {
  const how = req.raw || req.host !== undefined || req.contentLength !== undefined
    ? "raw socket"
    : "fetch (raw socket if fetch refuses it)";
  const out = [`${clip(req.method, 20)} ${clip(req.path, 240)}   [${how}]`];
  if (req.host !== undefined) out.push(`  Host: ${clip(JSON.stringify(req.host), 60)}`);
  if (req.contentLength !== undefined) out.push(`  Content-Length: ${req.contentLength}`);
  out.push(`  headers: ${headerSummary(req.headers)}`);
  out.push(`  body: ${bytesPrefix(req.body)}`);
  if (req.tags.length) out.push(`  tags: ${req.tags.join(", ")}`);
  return out.join("\n");
}

/** An answer as printed in a report. */
export function describeAnswer(a: Answer): string {
  const h = ["content-type", "x-request-id", "allow", "www-authenticate", "retry-after"]
    .filter((k) => a.headers.has(k)).map((k) => `${k}: ${a.headers.get(k)}`).join("; ");
  return `${a.status} via ${a.via}${a.url ? ` (${clip(a.url, 120)})` : ""}; ${h || "no headers"}` +
    `; body ${bytesPrefix(a.body, 300)}`;
}
