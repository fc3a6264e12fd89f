/**
 * What a fuzz campaign found, and how it prints: counts by status, the HTTP layer's bare 4xx
 * answers by the inputs that caused them, network errors, and findings (violations) grouped by
 * kind and route, each with its first request and answer, ready to replay from the seed.
 */

import type { ChildBroker } from "../_support/child.ts";
import { ROUTES } from "../../routes/app.ts";
import type { FuzzRequest } from "./generator.ts";
import { bytesPrefix, describe, describeAnswer } from "./check.ts";
import type { Answer } from "./http.ts";
import type { RawCase } from "./raw.ts";

/** One kind of violation: what broke, how often, and the first request that showed it. */
export interface Finding {
  what: string;
  count: number;
  /** Number of the first request that showed it (requests are numbered from 1). */
  first: number;
  request?: string;
  answer?: string;
  /** For crashes: the last requests before it and the broker's last log lines. */
  context?: string;
}

/** The outcome of a campaign. */
export interface Report {
  seed: number;
  sent: number;
  rawCases: number;
  seconds: number;
  restarts: number;
  byStatus: Record<string, number>;
  /** Bare 4xx answers of Deno's HTTP layer (no X-Request-Id, empty body). */
  layer: { count: number; byTag: string[]; examples: string[] };
  counters: Record<string, number>;
  /** Requests whose connection closed without an answer while the broker stayed up. */
  closed: string[];
  findings: Finding[];
}

const LITERALS = new Set(
  ROUTES.flatMap((r) => r.pattern.split("/").filter((s) => s && s[0] !== ":")),
);

/** `POST /publish/*`: the method and the path's route-table words, parameters starred. */
function routeKey(req: FuzzRequest): string {
  const segs = req.path.split("?")[0]!.split("/").slice(1, 6);
  return `${req.method.slice(0, 12)} /${segs.map((s) => LITERALS.has(s) ? s : "*").join("/")}`;
}

/** Collects a campaign's counts and findings. */
export class Findings {
  sent = 0;
  rawCases = 0;
  readonly byStatus = new Map<number, number>();
  readonly counters = new Map<string, number>();
  readonly tagTotal = new Map<string, number>();
  readonly tagLayer = new Map<string, number>();
  readonly layerExamples: string[] = [];
  readonly closedExamples: string[] = [];
  readonly list = new Map<string, Finding>();
  /** The last eight requests, described only when a crash needs them. */
  readonly recent: [number, FuzzRequest][] = [];

  constructor(readonly seed: number) {}

  /** Counts a request about to be sent and keeps it among the last eight. */
  sending(req: FuzzRequest): void {
    this.sent++;
    this.recent.push([this.sent, req]);
    if (this.recent.length > 8) this.recent.shift();
  }

  /** Counts an answer; `layer` marks a bare 4xx of the HTTP layer. */
  answered(req: FuzzRequest, a: Answer, layer: boolean): void {
    this.byStatus.set(a.status, (this.byStatus.get(a.status) ?? 0) + 1);
    const tags = req.tags.length ? req.tags : ["(no tag)"];
    for (const t of tags) this.tagTotal.set(t, (this.tagTotal.get(t) ?? 0) + 1);
    if (!layer) return;
    this.count("http-layer 4xx");
    for (const t of tags) this.tagLayer.set(t, (this.tagLayer.get(t) ?? 0) + 1);
    if (this.layerExamples.length < 4) {
      this.layerExamples.push(`#${this.sent} → ${a.status}\n${describe(req)}`);
    }
  }

  /** Adds one to a named counter. */
  count(label: string): void {
    this.counters.set(label, (this.counters.get(label) ?? 0) + 1);
  }

  /** A request that got no answer while the broker stayed up (the connection was closed). */
  networkError(req: FuzzRequest, error: string): void {
    this.count("closed without an answer");
    if (this.closedExamples.length < 6) {
      this.closedExamples.push(`#${this.sent} ${error.slice(0, 100)}\n${describe(req)}`);
    }
  }

  /** Records a violation, grouped with earlier ones of the same kind on the same route. */
  add(what: string, req: FuzzRequest, a?: Answer): void {
    const key = `${what}|${routeKey(req)}`;
    const f = this.list.get(key);
    if (f) return void f.count++;
    this.list.set(key, {
      what: `${what} — ${routeKey(req)}`,
      count: 1,
      first: this.sent,
      request: describe(req),
      answer: a ? describeAnswer(a) : "(no answer)",
    });
  }

  /** Records a finding about the process or its connections, with the last requests and logs. */
  crash(what: string, child?: ChildBroker): void {
    const f = this.list.get(what);
    if (f) return void f.count++;
    const logs = child?.logs.filter((l) => !l.includes('"level":"info"')).slice(-16) ?? [];
    const context = [
      "last requests before it:",
      ...this.recent.map(([n, req]) => `#${n} ${describe(req)}`.replace(/^/gm, "    ")),
      ...(logs.length ? ["broker stderr (last lines):", ...logs.map((l) => `    ${l}`)] : []),
    ].join("\n");
    this.list.set(what, { what, count: 1, first: this.sent, context });
  }

  /** Records a finding that needs no request context (an idle connection left open). */
  note(what: string): void {
    const f = this.list.get(what);
    if (f) return void f.count++;
    this.list.set(what, { what, count: 1, first: this.sent });
  }

  /** Judges one answer to a raw framing case (only: no 5xx). */
  raw(c: RawCase, status: number, error?: string): void {
    this.rawCases++;
    if (error) return this.count(`raw case could not connect: ${error.slice(0, 60)}`);
    if (status < 500) return;
    const key = `raw|${c.name}|${status}`;
    const f = this.list.get(key);
    if (f) return void f.count++;
    const bytes = new Uint8Array(c.parts.reduce((n, p) => n + p.length, 0));
    c.parts.reduce((at, p) => (bytes.set(p, at), at + p.length), 0);
    this.list.set(key, {
      what: `raw framing case "${c.name}": ${status} answer`,
      count: 1,
      first: this.sent,
      request: `raw bytes: ${bytesPrefix(bytes, 300)}`,
    });
  }

  /** One progress line. */
  progress(total: number, ms: number): string {
    const by = (lo: number) =>
      [...this.byStatus].filter(([s]) => s >= lo && s < lo + 100).reduce((n, [, c]) => n + c, 0);
    const rate = Math.round(this.sent / (ms / 1000));
    return `[fuzz] ${this.sent}/${total} sent (${rate}/s): 2xx ${by(200)}, 4xx ${by(400)}, ` +
      `5xx ${by(500)}, http-layer ${this.counters.get("http-layer 4xx") ?? 0}, ` +
      `findings ${this.list.size}`;
  }

  /** The campaign's report. */
  report(ms: number, restarts: number): Report {
    const byTag = [...this.tagLayer]
      .map(([t, n]) => ({ t, n, of: this.tagTotal.get(t) ?? n }))
      .sort((a, b) => b.n / b.of - a.n / a.of || b.n - a.n)
      .slice(0, 15)
      .map(({ t, n, of }) => `${t}: ${n} of ${of}`);
    return {
      seed: this.seed,
      sent: this.sent,
      rawCases: this.rawCases,
      seconds: Math.round(ms / 100) / 10,
      restarts,
      byStatus: Object.fromEntries([...this.byStatus].sort(([a], [b]) => a - b)),
      layer: {
        count: this.counters.get("http-layer 4xx") ?? 0,
        byTag,
        examples: this.layerExamples,
      },
      counters: Object.fromEntries(this.counters),
      closed: this.closedExamples,
      findings: [...this.list.values()],
    };
  }
}

/** The report as text, findings last, with the line that replays the run. */
export function formatReport(r: Report, replay: string): string {
  const out = [
    `fuzz seed ${r.seed}: ${r.sent} requests and ${r.rawCases} raw answers in ${r.seconds} s` +
    `, ${r.restarts} restart(s) after crashes`,
    `status counts: ${Object.entries(r.byStatus).map(([s, n]) => `${s}×${n}`).join(", ")}`,
    `other counts: ${
      Object.entries(r.counters).map(([k, n]) => `${k}: ${n}`).join("; ") || "none"
    }`,
    `HTTP-layer 4xx (no X-Request-Id, empty body; not the broker's): ${r.layer.count}`,
  ];
  if (r.layer.count) {
    out.push(`  by input tag (answered by the layer / sent): ${r.layer.byTag.join("; ")}`);
    for (const e of r.layer.examples) out.push(e.replace(/^/gm, "    "));
  }
  if (r.closed.length) out.push("closed without an answer (examples):");
  for (const e of r.closed) out.push(e.replace(/^/gm, "    "));
  const total = r.findings.reduce((n, f) => n + f.count, 0);
  out.push(`findings: ${r.findings.length} kinds, ${total} occurrences`);
  r.findings.forEach((f, i) => {
    out.push(`${i + 1}. [×${f.count}, first at request #${f.first}] ${f.what}`);
    if (f.request) out.push(`   request: ${f.request.replace(/\n/g, "\n   ")}`);
    if (f.answer) out.push(`   answer: ${f.answer}`);
    if (f.context) out.push(f.context.replace(/^/gm, "   "));
  });
  if (r.findings.length) out.push(`replay: ${replay}`);
  return out.join("\n");
}
