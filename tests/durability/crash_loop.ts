/**
 * A SIGKILL crash loop on one data dir. Publishers and consumers run against a child broker until
 * it is killed mid-traffic. The consumers ack singly and in batches, requeue (with a reason or a
 * delay), and bounce high-priority "poison" messages until they are dead-lettered. After every
 * restart, each topic and its `.dlq` are drained and checked against a ledger of what the broker
 * answered. `crash_test.ts` runs three iterations in CI; `tools/crash_loop.ts` runs long ones.
 */

import type { MessageJson } from "../../protocol/wire.ts";
import { type ChildBroker, logLines, start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, json, textOf } from "../_support/http.ts";
import { prng } from "../_support/prng.ts";
import { ATTEMPTS, type Held, Ledger, TOPICS, verify } from "./crash_ledger.ts";

const PUBLISHERS = 16;
/** Each iteration kills the broker once this many publishes (plus a random part) were answered. */
const MIN_ANSWERED = 1_500;
/** ...or after this long, whichever comes first. */
const ITERATION_BUDGET_MS = 20_000;

/** The shape of the traffic: rates are shares of deliveries (poison: of publishes). */
export interface Mix {
  ackRate: number;
  requeueRate: number;
  poisonRate: number;
  consumers: number;
  maxLimit: number;
}

/** What one crash loop runs: `iterations` kill/restart cycles with `env` for the broker. */
export interface CrashLoopOptions {
  iterations: number;
  env: Record<string, string>;
  mix: Mix;
  seed: number;
  /** Take everything with auto_ack at every Nth restart (the last one always does). */
  drainEvery?: number;
  /** Fail unless the broker logged a compaction (needs BROKER_LOG_LEVEL=debug). */
  expectCompaction?: boolean;
  /** Receives one line per iteration. */
  log?: (line: string) => void;
  /** Aborting SIGKILLs the child at once and makes `crashLoop` reject. */
  signal?: AbortSignal;
}

/** The two traffic shapes that CI and the long-run tool share. */
export const SCENARIOS = {
  /** A backlog that grows across iterations, held by long leases between kills. */
  plain: {
    env: { BROKER_FSYNC: "always" },
    mix: { ackRate: 0.65, requeueRate: 0.1, poisonRate: 0.02, consumers: 4, maxLimit: 10 },
  },
  /** Churn that keeps compaction rewriting the WALs; everything is drained at each restart. */
  compaction: {
    env: {
      BROKER_FSYNC: "always",
      BROKER_COMPACT_MIN_BYTES: "16384",
      BROKER_COMPACT_RATIO: "2",
      BROKER_LOG_LEVEL: "debug",
    },
    mix: { ackRate: 0.93, requeueRate: 0.03, poisonRate: 0.01, consumers: 12, maxLimit: 50 },
    drainEvery: 1,
    expectCompaction: true,
  },
} satisfies Record<string, Omit<CrashLoopOptions, "iterations" | "seed">>;

/** The counts of one iteration: its traffic, what was in flight at the kill, the recovery, what was held. */
export interface IterationReport extends Held {
  iteration: number;
  published: number;
  delivered: number;
  acked: number;
  requeued: number;
  deadLettered: number;
  killedAfterMs: number;
  inFlight: { publishes: number; acks: number; requeues: number; leased: number };
  recovered: { messages: number; records: number; durationMs: number };
}

/** A whole run: its seed, each iteration, and the ledger's problems (empty when it held). */
export interface CrashLoopReport {
  seed: number;
  iterations: IterationReport[];
  compactions: number;
  problems: string[];
}

/** Thrown by `crashLoop` when the ledger does not hold; carries the report so far. */
export class CrashLoopError extends Error {
  constructor(readonly report: CrashLoopReport) {
    super(
      `crash loop with seed ${report.seed} failed in iteration ${report.iterations.length}:\n` +
        report.problems.join("\n"),
    );
  }
}

type Traffic = Pick<
  IterationReport,
  "published" | "delivered" | "acked" | "requeued" | "deadLettered" | "killedAfterMs"
>;

/** Publishers and consumers against `child` until the target is reached; then SIGKILL. */
async function traffic(
  child: ChildBroker,
  ledger: Ledger,
  iteration: number,
  rnd: () => number,
  mix: Mix,
): Promise<Traffic> {
  const target = MIN_ANSWERED + Math.floor(rnd() * 1_000);
  const t = { published: 0, delivered: 0, acked: 0, requeued: 0, deadLettered: 0 };
  const t0 = performance.now();
  let killedAfterMs = 0;
  let stopping = false;
  const kill = () => {
    if (stopping) return;
    stopping = true;
    killedAfterMs = Math.round(performance.now() - t0);
    child.kill("SIGKILL");
  };
  const deadline = setTimeout(kill, ITERATION_BUDGET_MS);
  // A request that fails is cut by the kill; one that fails before it is a problem.
  const cut = (e: unknown) => {
    if (!stopping) ledger.problem(`a request failed before the kill: ${e}`);
  };
  const post = (path: string, body?: string, type = "application/json") =>
    fetch(`${child.url}${path}`, { method: "POST", body, headers: { "content-type": type } });
  const acked = (id: string) => {
    ledger.ackPending.delete(id);
    ledger.acked.add(id);
    ledger.leased.delete(id);
    t.acked++;
  };

  async function publisher(w: number): Promise<void> {
    const topic = TOPICS[w % TOPICS.length]!;
    for (let n = 0; n < 100_000 && !stopping; n++) {
      const poison = rnd() < mix.poisonRate;
      const payload = `i${iteration}-p${w}-${n}${poison ? "-poison" : ""}`;
      ledger.pending.set(payload, topic);
      let res: Response, body: { id?: string };
      const path = `/publish/${topic}${poison ? "?priority=high" : ""}`;
      try {
        res = await post(path, payload, "text/plain");
        body = await json(res);
      } catch (e) {
        return cut(e); // killed with this publish in flight: it stays pending
      }
      ledger.pending.delete(payload);
      if (res.status !== 201 || typeof body.id !== "string") {
        ledger.problem(`publish ${payload} answered ${res.status} ${JSON.stringify(body)}`);
        continue;
      }
      ledger.published.set(payload, { topic, id: body.id });
      if (++t.published >= target) kill();
    }
  }

  async function ackOne(topic: string, id: string): Promise<void> {
    ledger.ackPending.add(id);
    const res = await fetch(`${child.url}/ack/${topic}/${id}`, { method: "POST" });
    await res.body?.cancel();
    if (res.status === 204) acked(id);
    else ledger.problem(`single ack of delivered ${topic}/${id} answered ${res.status}`);
  }

  async function ackBatch(topic: string, ids: string[]): Promise<void> {
    for (const id of ids) ledger.ackPending.add(id);
    const res = await post(`/ack/${topic}`, JSON.stringify({ ids }));
    const body = await json<{ acked?: number; not_found?: string[] }>(res);
    if (res.status !== 200 || body.acked !== ids.length || body.not_found?.length !== 0) {
      ledger.problem(`batch ack of ${ids.length} delivered ids answered ${JSON.stringify(body)}`);
      return;
    }
    for (const id of ids) acked(id);
  }

  async function requeue(m: MessageJson): Promise<void> {
    const moves = m.retry_count + 1 >= ATTEMPTS;
    ledger.requeuePending.add(m);
    const q = new URLSearchParams();
    if (rnd() < 0.5) q.set("reason", `bounced in iteration ${iteration}`);
    if (rnd() < 0.3) q.set("delay", "50ms");
    const res = await post(`/requeue?${q}`, JSON.stringify(m));
    const body = await json<{ status?: string; retry_count?: number }>(res);
    const want = moves ? "dead_lettered" : "requeued";
    if (res.status !== 200 || body.status !== want || body.retry_count !== m.retry_count + 1) {
      const what = `requeue of ${m.topic}/${m.id} at retry_count ${m.retry_count}`;
      return ledger.problem(`${what} answered ${res.status} ${JSON.stringify(body)}`);
    }
    ledger.requeuePending.delete(m);
    if (ledger.leased.get(m.id) === m) ledger.leased.delete(m.id);
    if (moves) {
      ledger.deadLettered.add(m.id);
      t.deadLettered++;
    } else {
      ledger.retries.set(m.id, Math.max(body.retry_count, ledger.retries.get(m.id) ?? 0));
      t.requeued++;
    }
  }

  async function consumer(c: number): Promise<void> {
    for (let i = 0; i < 100_000 && !stopping; i++) {
      const topic = TOPICS[(c + i) % TOPICS.length]!;
      const limit = 1 + Math.floor(rnd() * mix.maxLimit);
      try {
        // An explicit lease, so no lease ends (and no hidden requeue) during an iteration.
        const msgs = await consumeList(
          child.url,
          topic,
          `limit=${limit}&timeout=100ms&visibility=5m`,
        );
        t.delivered += msgs.length;
        for (const m of msgs) ledger.leased.set(m.id, m);
        const batch: string[] = [];
        for (const m of msgs) {
          const r = rnd();
          if (m.priority === "high") await requeue(m); // poison: bounces until dead-lettered
          else if (r < mix.ackRate * 0.45) await ackOne(topic, m.id);
          else if (r < mix.ackRate) batch.push(m.id);
          else if (r < mix.ackRate + mix.requeueRate) await requeue(m);
          // else: leave it in flight; it must come back after the kill
        }
        if (batch.length > 0) await ackBatch(topic, batch);
      } catch (e) {
        return cut(e);
      }
    }
  }

  try {
    await Promise.all([
      ...Array.from({ length: PUBLISHERS }, (_, w) => publisher(w)),
      ...Array.from({ length: mix.consumers }, (_, c) => consumer(c)),
    ]);
  } finally {
    clearTimeout(deadline);
    kill();
  }
  return { ...t, killedAfterMs };
}

/** One iteration as one line of text. */
function describe(r: IterationReport, of: number): string {
  const f = r.inFlight, rec = r.recovered;
  return `iteration ${r.iteration}/${of}: published ${r.published}, delivered ${r.delivered}, ` +
    `acked ${r.acked}, requeued ${r.requeued}, dead-lettered ${r.deadLettered}; ` +
    `killed at ${r.killedAfterMs} ms with ${f.publishes} publishes, ${f.acks} acks, ` +
    `${f.requeues} requeues in flight and ${f.leased} leased; recovered ${rec.messages} ` +
    `messages from ${rec.records} records in ${rec.durationMs} ms; held ${r.held} ` +
    `(${r.leasedBack} leased back, ${r.inDlq} in DLQs, ${r.split} split by a kill)`;
}

/** Runs the crash loop on a fresh data dir; returns its report, or throws a CrashLoopError. */
export async function crashLoop(opts: CrashLoopOptions): Promise<CrashLoopReport> {
  const ledger = new Ledger();
  const report: CrashLoopReport = {
    seed: opts.seed,
    iterations: [],
    compactions: 0,
    problems: ledger.problems,
  };
  const rnd = prng(opts.seed);
  const log = opts.log ?? (() => {});
  const aborted = () => opts.signal?.throwIfAborted();
  let child: ChildBroker | undefined;
  const onAbort = () => child?.kill("SIGKILL");
  opts.signal?.addEventListener("abort", onAbort);
  try {
    await withDataDir(async (dir) => {
      child = await start(dir, opts.env);
      for (let i = 1; i <= opts.iterations && ledger.problems.length === 0; i++) {
        aborted();
        const t = await traffic(child, ledger, i, rnd, opts.mix);
        const inFlight = {
          publishes: ledger.pending.size,
          acks: ledger.ackPending.size,
          requeues: ledger.requeuePending.size,
          leased: ledger.leased.size,
        };
        const status = await stop(child, "SIGKILL");
        aborted();
        report.compactions += logLines(child).filter((l) => l.msg === "compacted").length;
        if (status.signal !== "SIGKILL") {
          throw new Error(`iteration ${i}: the broker died some other way:\n${child.logs}`);
        }
        if (t.published < MIN_ANSWERED) {
          ledger.problem(`iteration ${i}: only ${t.published} publishes answered in time`);
        }
        child = await start(dir, opts.env);
        aborted();
        const rec = logLines(child).find((l) => l.msg === "recovered");
        if (!rec) throw new Error(`no "recovered" log line after restart ${i}:\n${child.logs}`);
        const final = i === opts.iterations || i % (opts.drainEvery ?? opts.iterations) === 0;
        const held = await verify(child, ledger, final);
        const recovered = {
          messages: Number(rec.messages),
          records: Number(rec.records),
          durationMs: Number(rec.duration_ms),
        };
        const r: IterationReport = { iteration: i, ...t, inFlight, recovered, ...held };
        report.iterations.push(r);
        log(describe(r, opts.iterations));
        if (recovered.messages !== held.held) {
          ledger.problem(`iteration ${i}: "recovered" counts ${recovered.messages} messages`);
        }
        if (held.leasedBack === 0) {
          ledger.problem(`iteration ${i}: no delivered-but-unacked message came back`);
        }
      }
      if (ledger.problems.length > 0) return;
      // The last verify took everything with auto_ack: after one more kill nothing is left.
      await stop(child, "SIGKILL");
      child = await start(dir, opts.env);
      for (const topic of TOPICS) {
        const left = [
          ...await consumeList(child.url, topic, "peek=true&limit=1000"),
          ...await consumeList(child.url, `${topic}.dlq`, "peek=true&limit=1000"),
        ];
        if (left.length) ledger.problem(`${topic}: ${left.map(textOf)} left after the last drain`);
      }
      await stop(child, "SIGTERM");
    });
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
  }
  if (opts.expectCompaction && report.compactions === 0) ledger.problem("compaction never ran");
  if (ledger.problems.length > 0) throw new CrashLoopError(report);
  return report;
}
