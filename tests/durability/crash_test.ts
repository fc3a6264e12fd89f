/**
 * SIGKILL mid-traffic, three times, on one data dir (BROKER_FSYNC=always): every publish
 * answered 201 survives exactly once unless its ack was answered 2xx, no acked message comes
 * back, nothing appears that was never published, and delivered-but-unacked messages are
 * available again after the restart (leases are not durable).
 */

import assert from "node:assert/strict";
import type { ChildBroker } from "../_support/server.ts";
import {
  consume,
  drain,
  json,
  logLines,
  prng,
  publish,
  queues,
  start,
  stop,
  text,
  type WireMessage,
  withDataDir,
} from "./_util.ts";

const TOPICS = ["crash-a", "crash-b", "crash-c"];
const PUBLISHERS = 16;
const CYCLES = 3;
/** Each cycle kills the broker once this many publishes (plus a random part) were answered. */
const MIN_ANSWERED = 1_500;
/** ...or after this long, whichever comes first. */
const CYCLE_BUDGET_MS = 12_000;

/** What the test knows about every message, carried across the kill/restart cycles. */
class Ledger {
  /** payload → topic and id, for each publish answered 201 (or found after a restart). */
  published = new Map<string, { topic: string; id: string }>();
  /** payload → topic, for each publish sent but not (yet) answered. */
  pending = new Map<string, string>();
  /** Publishes in flight at a kill that did not survive it: they must never appear. */
  lost = new Set<string>();
  /** Ids whose ack (single, batch or auto_ack) was answered 2xx. */
  acked = new Set<string>();
  /** Ids whose ack was sent but not answered. */
  ackPending = new Set<string>();
  /** id → payload, learned from deliveries (a consumer may see a message before its 201). */
  payloadOf = new Map<string, string>();
  /** Ids delivered (traffic or verify) whose ack was never answered: the kill must return them. */
  leased = new Set<string>();
  problems: string[] = [];

  problem(s: string): void {
    if (this.problems.length < 50) this.problems.push(s);
  }
}

interface TrafficStats {
  answered: number;
  delivered: number;
  acked: number;
  killedAfterMs: number;
}

/** Publishers and consumers against `child` until the target is reached; then SIGKILL. */
async function traffic(
  child: ChildBroker,
  ledger: Ledger,
  cycle: number,
  rnd: () => number,
  mix: { ackRate: number; consumers: number; maxLimit: number },
): Promise<TrafficStats> {
  const target = MIN_ANSWERED + Math.floor(rnd() * 1_000);
  const stats: TrafficStats = { answered: 0, delivered: 0, acked: 0, killedAfterMs: 0 };
  const t0 = performance.now();
  let stopping = false;
  const kill = () => {
    if (stopping) return;
    stopping = true;
    stats.killedAfterMs = Math.round(performance.now() - t0);
    child.kill("SIGKILL");
  };
  const deadline = setTimeout(kill, CYCLE_BUDGET_MS);

  async function publisher(w: number): Promise<void> {
    const topic = TOPICS[w % TOPICS.length]!;
    for (let n = 0; n < 100_000 && !stopping; n++) {
      const payload = `c${cycle}-p${w}-${n}`;
      ledger.pending.set(payload, topic);
      let res: Response;
      try {
        res = await fetch(`${child.url}/publish/${topic}`, {
          method: "POST",
          body: payload,
          headers: { "content-type": "text/plain" },
        });
      } catch {
        return; // killed with this request in flight: it stays pending
      }
      let body: { id?: string };
      try {
        body = await json(res);
      } catch {
        return; // killed while the answer was on its way
      }
      if (res.status !== 201 || typeof body.id !== "string") {
        ledger.problem(`publish ${payload} answered ${res.status} ${JSON.stringify(body)}`);
        ledger.pending.delete(payload);
        continue;
      }
      ledger.pending.delete(payload);
      ledger.published.set(payload, { topic, id: body.id });
      ledger.payloadOf.set(body.id, payload);
      if (++stats.answered >= target) kill();
    }
  }

  async function ackOne(topic: string, id: string): Promise<void> {
    ledger.ackPending.add(id);
    const res = await fetch(`${child.url}/ack/${topic}/${id}`, { method: "POST" });
    await res.body?.cancel();
    if (res.status === 204) {
      ledger.ackPending.delete(id);
      ledger.acked.add(id);
      ledger.leased.delete(id);
      stats.acked++;
    } else {
      ledger.problem(`single ack of delivered ${topic}/${id} answered ${res.status}`);
    }
  }

  async function ackBatch(topic: string, ids: string[]): Promise<void> {
    for (const id of ids) ledger.ackPending.add(id);
    const res = await fetch(`${child.url}/ack/${topic}`, {
      method: "POST",
      body: JSON.stringify({ ids }),
      headers: { "content-type": "application/json" },
    });
    const body = await json<{ acked?: number; not_found?: string[] }>(res);
    if (res.status !== 200 || !Array.isArray(body.not_found)) {
      ledger.problem(`batch ack on ${topic} answered ${res.status} ${JSON.stringify(body)}`);
      return;
    }
    const missing = new Set(body.not_found);
    if (missing.size > 0) {
      ledger.problem(`batch ack of just-delivered ids said not_found: ${[...missing]}`);
    }
    if (body.acked !== ids.length - missing.size) {
      ledger.problem(`batch ack of ${ids.length} answered acked=${body.acked}`);
    }
    for (const id of ids) {
      if (missing.has(id)) continue;
      ledger.ackPending.delete(id);
      ledger.acked.add(id);
      ledger.leased.delete(id);
      stats.acked++;
    }
  }

  async function consumer(c: number): Promise<void> {
    for (let i = 0; i < 100_000 && !stopping; i++) {
      const topic = TOPICS[(c + i) % TOPICS.length]!;
      const limit = 1 + Math.floor(rnd() * mix.maxLimit);
      try {
        const res = await fetch(`${child.url}/consume/${topic}?limit=${limit}&timeout=100ms`);
        if (res.status === 404) {
          await res.body?.cancel();
          continue;
        }
        const body = await json<WireMessage | WireMessage[]>(res);
        if (res.status !== 200) {
          ledger.problem(`consume ${topic} answered ${res.status} ${JSON.stringify(body)}`);
          continue;
        }
        const msgs = Array.isArray(body) ? body : [body];
        stats.delivered += msgs.length;
        const batch: string[] = [];
        for (const m of msgs) {
          ledger.payloadOf.set(m.id, text(m));
          ledger.leased.add(m.id);
          const r = rnd();
          if (r < mix.ackRate * 0.45) await ackOne(topic, m.id);
          else if (r < mix.ackRate) batch.push(m.id);
          // else: leave it in flight; it must come back after the kill
        }
        if (batch.length > 0) await ackBatch(topic, batch);
      } catch {
        return; // killed mid-request
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
  return stats;
}

/**
 * Takes every message of every topic (and its `.dlq`) of a freshly restarted broker and checks
 * it against the ledger. With `final`, takes with auto_ack; otherwise holds them with a long
 * lease so the next cycle's consumers cannot see them and the next kill must bring them back.
 */
async function verify(
  child: ChildBroker,
  ledger: Ledger,
  final: boolean,
): Promise<{ held: number; leasedBack: number }> {
  const before = await queues(child.url);
  const seen = new Map<string, WireMessage[]>();
  let total = 0;
  let leasedBack = 0;
  for (const topic of TOPICS) {
    const item = before.get(topic);
    const main = await drain(child.url, topic, final ? "auto_ack=true" : "visibility=1h");
    const dlq = await drain(
      child.url,
      `${topic}.dlq`,
      final ? "auto_ack=true" : "visibility=1h",
    );
    if (item) {
      if (item.in_flight !== 0) ledger.problem(`${topic}: in_flight ${item.in_flight} at start`);
      if (item.depth !== main.length) {
        ledger.problem(`${topic}: depth ${item.depth} but ${main.length} taken`);
      }
      if ((item.dlq_depth ?? 0) !== dlq.length) {
        ledger.problem(`${topic}: dlq_depth ${item.dlq_depth} but ${dlq.length} taken`);
      }
    } else if (main.length > 0) {
      ledger.problem(`${topic}: missing from /api/queues but holds ${main.length}`);
    }
    for (const m of [...main, ...dlq]) {
      const p = text(m);
      const list = seen.get(p) ?? [];
      list.push(m);
      seen.set(p, list);
      total++;
      if (ledger.leased.has(m.id)) leasedBack++;
    }
  }

  for (const [payload, msgs] of seen) {
    const m = msgs[0]!;
    if (msgs.length > 1) {
      ledger.problem(
        `payload ${payload} present ${msgs.length} times (ids ${msgs.map((x) => x.id)})`,
      );
    }
    const known = ledger.published.get(payload);
    if (known) {
      if (known.id !== m.id) {
        ledger.problem(`payload ${payload}: id ${m.id}, published as ${known.id}`);
      }
      if (m.topic !== known.topic && m.topic !== `${known.topic}.dlq`) {
        ledger.problem(`payload ${payload} found in ${m.topic}, published to ${known.topic}`);
      }
    } else if (ledger.pending.has(payload)) {
      // In flight at the kill and made it to disk: from now on it must stay.
      const topic = ledger.pending.get(payload)!;
      ledger.pending.delete(payload);
      ledger.published.set(payload, { topic, id: m.id });
    } else if (ledger.lost.has(payload)) {
      ledger.problem(`payload ${payload} was gone after an earlier restart, now it is back`);
    } else {
      ledger.problem(`payload ${JSON.stringify(payload)} (id ${m.id}) was never published`);
    }
    if (ledger.acked.has(m.id)) {
      ledger.problem(`payload ${payload} (id ${m.id}) came back although its ack was answered`);
    }
    if (ledger.ackPending.has(m.id)) ledger.ackPending.delete(m.id); // that ack did not land
  }

  for (const [payload, { id }] of ledger.published) {
    if (seen.has(payload)) continue;
    if (ledger.acked.has(id)) continue;
    if (ledger.ackPending.has(id)) {
      // The ack was in flight at the kill and landed: it must stay acked.
      ledger.ackPending.delete(id);
      ledger.acked.add(id);
      continue;
    }
    ledger.problem(`payload ${payload} (id ${id}) was answered 201 and is lost`);
  }
  for (const payload of ledger.pending.keys()) ledger.lost.add(payload);
  ledger.pending.clear();
  ledger.leased.clear();
  for (const msgs of seen.values()) {
    for (const m of msgs) (final ? ledger.acked : ledger.leased).add(m.id);
  }
  return { held: total, leasedBack };
}

/** Three kill/restart cycles on one data dir, carrying the ledger. */
function crashCycles(opts: {
  env: Record<string, string>;
  mix: { ackRate: number; consumers: number; maxLimit: number };
  /** Take everything with auto_ack at every restart (keeps live state small for compaction). */
  drainEachCycle?: boolean;
  /** With compaction on, assert that it ran (needs BROKER_LOG_LEVEL=debug). */
  expectCompaction?: boolean;
}): Promise<void> {
  return withDataDir(async (dir) => {
    const seed = Number(Deno.env.get("CRASH_SEED") ?? Date.now() % 100_000);
    const rnd = prng(seed);
    const ledger = new Ledger();
    const report: string[] = [`seed ${seed}`];
    const env = opts.env;
    let compactions = 0;

    let child = await start(dir, env);
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      const stats = await traffic(child, ledger, cycle, rnd, opts.mix);
      const status = await stop(child, "SIGKILL");
      compactions += logLines(child).filter((l) => l.msg === "compacted").length;
      assert.equal(status.signal, "SIGKILL", `cycle ${cycle}: the child died some other way`);
      report.push(
        `cycle ${cycle}: ${JSON.stringify(stats)}, in flight at the kill: ` +
          `${ledger.pending.size} publishes, ${ledger.ackPending.size} acks`,
      );
      assert.ok(
        stats.answered >= MIN_ANSWERED,
        `cycle ${cycle}: only ${stats.answered} answered`,
      );

      child = await start(dir, env);
      const recovered = logLines(child).find((l) => l.msg === "recovered");
      assert.ok(recovered, `no "recovered" log line after restart ${cycle}:\n${child.logs}`);
      const { held, leasedBack } = await verify(
        child,
        ledger,
        cycle === CYCLES || opts.drainEachCycle === true,
      );
      report.push(
        `restart ${cycle}: recovered ${recovered.messages} messages from ${recovered.records} ` +
          `records in ${recovered.duration_ms} ms; ${held} held, ${leasedBack} of them ` +
          `delivered but unacked before the kill`,
      );
      assert.deepEqual(ledger.problems, [], report.join("\n"));
      assert.equal(recovered.messages, held, "the recovered line counts what is held");
      assert.ok(leasedBack > 0, `restart ${cycle}: no delivered-but-unacked message came back`);
    }

    // The final verify took everything with auto_ack: after one more kill nothing is left.
    await stop(child, "SIGKILL");
    child = await start(dir, env);
    for (const topic of TOPICS) {
      const left = [
        ...await consume(child.url, topic, "peek=true&limit=1000"),
        ...await consume(child.url, `${topic}.dlq`, "peek=true&limit=1000"),
      ];
      assert.deepEqual(left.map(text), [], `${topic} after auto_ack drain and kill`);
    }
    await stop(child, "SIGTERM");
    report.push(`compactions: ${compactions}`);
    console.log(report.join("\n"));
    if (opts.expectCompaction) assert.ok(compactions > 0, "compaction never ran");
  });
}

Deno.test({
  name: "SIGKILL mid-traffic (fsync=always), three times: no answered write lost or duplicated",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    crashCycles({
      env: { BROKER_FSYNC: "always" },
      mix: { ackRate: 0.65, consumers: 4, maxLimit: 10 },
    }),
});

Deno.test({
  name: "SIGKILL mid-traffic while compaction keeps rewriting the WAL: same guarantees",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    crashCycles({
      env: {
        BROKER_FSYNC: "always",
        BROKER_COMPACT_MIN_BYTES: "16384",
        BROKER_COMPACT_RATIO: "2",
        BROKER_LOG_LEVEL: "debug",
      },
      mix: { ackRate: 0.95, consumers: 12, maxLimit: 50 },
      drainEachCycle: true,
      expectCompaction: true,
    }),
});

Deno.test({
  name: "SIGKILL while messages move to new dead-letter queues: each is in its topic or its DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const n = 100;
      const topics = Array.from({ length: n }, (_, i) => `mv-${i}`);
      let child = await start(dir);
      const requeue = async (m: WireMessage) => {
        const res = await fetch(`${child.url}/requeue`, {
          method: "POST",
          body: JSON.stringify(m),
          headers: { "content-type": "application/json" },
        });
        return { status: res.status, body: await json<Record<string, unknown>>(res) };
      };
      await Promise.all(topics.map(async (t) => {
        assert.equal((await publish(child.url, t, `msg-${t}`)).status, 201);
        for (let i = 1; i <= 2; i++) {
          const [m] = await consume(child.url, t, "limit=1");
          const r = await requeue(m!);
          assert.equal(r.body.retry_count, i, JSON.stringify(r.body));
        }
      }));
      // The third requeue of each moves it to `{topic}.dlq`, a topic (and file) not yet made.
      const inFlight = await Promise.all(topics.map(async (t) => {
        const [m] = await consume(child.url, t, "limit=1");
        return m!;
      }));
      const killAfter = 1 + Math.floor(Math.random() * 10);
      const answered = new Set<string>();
      await Promise.all(inFlight.map(async (m) => {
        let r;
        try {
          r = await requeue(m);
        } catch {
          return; // in flight at the kill
        }
        assert.equal(r.body.status, "dead_lettered", JSON.stringify(r.body));
        answered.add(m.topic);
        if (answered.size === killAfter) child.kill("SIGKILL");
      }));
      await stop(child, "SIGKILL");

      child = await start(dir);
      const problems: string[] = [];
      for (const t of topics) {
        const src = await consume(child.url, t, "peek=true&limit=10");
        const dlq = await consume(child.url, `${t}.dlq`, "peek=true&limit=10");
        const where = `${t}: ${src.length} in the topic, ${dlq.length} in the DLQ`;
        if (src.length > 1 || dlq.length > 1) problems.push(`${where} (duplicated)`);
        if (answered.has(t)) {
          if (src.length !== 0 || dlq.length !== 1) problems.push(`${where}; move was answered`);
        } else if (src.length + dlq.length === 0) {
          problems.push(`${where}: LOST (published, never acked, move unanswered)`);
        }
        for (const m of src) if (m.retry_count !== 2) problems.push(`${t}: retry ${m.retry_count}`);
        for (const m of dlq) {
          if (m.retry_count !== 3) problems.push(`${t}.dlq: retry ${m.retry_count}`);
        }
      }
      await stop(child, "SIGKILL");
      assert.deepEqual(
        problems,
        [],
        `${answered.size} of ${n} moves answered before the kill; ${problems.length} problems`,
      );
    }),
});

Deno.test({
  name: "SIGKILL during redrives onto busy topics: each dead letter is in its topic or its DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const topics = Array.from({ length: 40 }, (_, i) => `rd-${i}`);
    const perTopic = 5;
    const report: string[] = [];
    // Up to eight trials: the kill has to land while moves are half written.
    for (let trial = 1; trial <= 8; trial++) {
      await withDataDir(async (dir) => {
        let child = await start(dir);
        const requeue = async (m: WireMessage) => {
          const res = await fetch(`${child.url}/requeue`, {
            method: "POST",
            body: JSON.stringify(m),
            headers: { "content-type": "application/json" },
          });
          await res.body?.cancel();
          assert.equal(res.status, 200);
        };
        await Promise.all(topics.map(async (t) => {
          for (let k = 0; k < perTopic; k++) {
            assert.equal((await publish(child.url, t, `dead-${t}-${k}`)).status, 201);
          }
          for (let r = 0; r < 3; r++) {
            for (const m of await consume(child.url, t, `limit=${perTopic}`)) await requeue(m);
          }
        }));
        // Publishers keep every target topic's WAL busy while the redrives run.
        let stopping = false;
        let warm!: () => void;
        const warmed = new Promise<void>((res) => warm = res);
        let bgAnswered = 0;
        const background = topics.map(async (t) => {
          for (let i = 0; !stopping && i < 100_000; i++) {
            try {
              await publish(child.url, t, `bg-${i}`);
            } catch {
              return;
            }
            if (++bgAnswered === 200) warm();
          }
        });
        await warmed;
        const answered = new Set<string>();
        const killAfter = 1; // the first answer: the other moves are under way
        await Promise.all(topics.map(async (t) => {
          try {
            const res = await fetch(`${child.url}/api/queues/redrive?queue=${t}`, {
              method: "POST",
            });
            const body = await json<{ moved: number }>(res);
            assert.equal(body.moved, perTopic);
            answered.add(t);
            if (answered.size === killAfter) {
              stopping = true;
              child.kill("SIGKILL");
            }
          } catch (e) {
            if (e instanceof assert.AssertionError) throw e;
          }
        }));
        stopping = true;
        await stop(child, "SIGKILL");
        await Promise.all(background);

        child = await start(dir);
        const lost: string[] = [];
        for (const t of topics) {
          const have = new Set([
            ...(await drain(child.url, t, "auto_ack=true")).map(text),
            ...(await consume(child.url, `${t}.dlq`, "peek=true&limit=1000")).map(text),
          ]);
          for (let k = 0; k < perTopic; k++) {
            if (!have.has(`dead-${t}-${k}`)) {
              lost.push(`dead-${t}-${k}${answered.has(t) ? " (redrive answered)" : ""}`);
            }
          }
        }
        await stop(child, "SIGKILL");
        report.push(`trial ${trial}: ${answered.size} of ${topics.length} redrives answered`);
        assert.deepEqual(lost, [], `${report.join("; ")}: ${lost.length} dead letters lost`);
      });
    }
  },
});
