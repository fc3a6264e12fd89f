/**
 * @module Section `workers` (rows 13): the same build at BROKER_WORKERS=1 and 2, one run, one
 * machine. 13a publishes 1 KiB (fsync always) at 64 connections over 16 topics, so each worker
 * owns some; 13b drains one topic with consume limit=100 + batch ack (half the requests land on
 * the worker that does not own it). Each notes the broker's CPU per message, read from
 * /proc/<pid>/stat around the timed run.
 */

import { busyNote, procTicks, quiet, USER_HZ } from "../harness/cpu.ts";
import { int, log } from "../harness/format.ts";
import type { Options, Plan } from "../harness/plan.ts";
import { fill } from "../harness/probes.ts";
import { withBroker } from "../harness/spawn.ts";
import { wrkTimed, wrkUntil } from "../harness/wrk.ts";
import { topicStats } from "../harness/probes.ts";
import { row, verdict } from "../report.ts";

const KIB = 1024;
const TOPICS = 16;
const COUNTS = [1, 2] as const;

/** µs of the broker's CPU per message over a run that handled `messages`. */
function cpuUs(ticks: number, messages: number): number {
  return ticks / USER_HZ * 1e6 / messages;
}

export async function workers(o: Options, p: Plan): Promise<void> {
  const publish = new Map<number, { rate: number; cpu: number }>();
  for (const n of COUNTS) {
    await withBroker(
      o,
      10_000_000,
      async (b) => {
        const run = { script: "publish_topics.lua", threads: 1, conns: 64, url: b.url };
        await quiet();
        await wrkTimed({ ...run, seconds: p.warmS, args: ["1024", String(TOPICS), "warm"] });
        const t0 = await procTicks(b.pid);
        const w = await wrkTimed({
          ...run,
          seconds: p.runS,
          args: ["1024", String(TOPICS), "bench"],
        });
        const ticks = await procTicks(b.pid) - t0;
        const done = w.requests - w.status_errors;
        const rate = done / (w.duration_us / 1e6);
        publish.set(n, { rate, cpu: cpuUs(ticks, done) });
        log(`workers=${n} publish c=64 over ${TOPICS} topics: ${int(rate)} msg/s`);
      },
      [],
      ["--workers", String(n)],
    );
  }
  const one = publish.get(1)!, two = publish.get(2)!;
  for (const n of COUNTS) {
    const r = publish.get(n)!;
    const ratio = r.rate / one.rate;
    row({
      section: "13a",
      measure: `publish 1 KiB over ${TOPICS} topics (fsync always), BROKER_WORKERS=${n}, msg/s`,
      conns: "64",
      result: int(r.rate),
      notes: [
        `broker CPU ${r.cpu.toFixed(1)} µs a publish`,
        n > 1 ? `${ratio.toFixed(2)} × BROKER_WORKERS=1` : "",
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: n > 1 ? "≥ 1.5 × BROKER_WORKERS=1" : "",
      status: n > 1 ? verdict(two.rate >= 1.5 * one.rate) : "",
    });
  }

  const drain = new Map<number, { rate: number; cpu: number }>();
  for (const n of COUNTS) {
    await withBroker(
      o,
      Math.max(200_000, p.drainCount * 2),
      async (b) => {
        const topic = "drain-workers";
        await fill(b.url, topic, p.drainCount, KIB);
        await quiet();
        const t0 = await procTicks(b.pid);
        const { elapsedMs } = await wrkUntil(
          {
            script: "consume.lua",
            url: b.url,
            threads: p.drainConns,
            conns: p.drainConns,
            seconds: 300,
            args: [topic, "100"],
          },
          async () => {
            const s = await topicStats(b.url, topic);
            return s.depth === 0 && s.in_flight === 0;
          },
        );
        const ticks = await procTicks(b.pid) - t0;
        const rate = p.drainCount / (elapsedMs / 1000);
        drain.set(n, { rate, cpu: cpuUs(ticks, p.drainCount) });
        log(`workers=${n} drain: ${int(rate)} msg/s`);
      },
      [],
      ["--workers", String(n)],
    );
  }
  const d1 = drain.get(1)!, d2 = drain.get(2)!;
  for (const n of COUNTS) {
    const r = drain.get(n)!;
    row({
      section: "13b",
      measure: `consume limit=100 + batch ack of one topic, BROKER_WORKERS=${n}, msg/s`,
      conns: String(p.drainConns),
      result: int(r.rate),
      notes: [
        `broker CPU ${r.cpu.toFixed(1)} µs a delivered message`,
        n > 1 ? `${(r.rate / d1.rate).toFixed(2)} × BROKER_WORKERS=1` : "",
      ].filter(Boolean).join("; "),
      target: n > 1 ? "≥ 1.5 × BROKER_WORKERS=1" : "",
      status: n > 1 ? verdict(d2.rate >= 1.5 * d1.rate) : "",
    });
  }
}
