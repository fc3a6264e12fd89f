/**
 * @module Section `e2e` (rows 4): send → receive latency at a steady publish rate with a
 * long-polling consumer in another process (tests/bench/e2e_client.ts): limit=1 acking each,
 * limit=100 batch-acking, limit=100 with auto_ack; each beside the same clients against the
 * durable queue ceiling.
 */

import { removeDir, tempDir } from "../harness/cleanup.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log } from "../harness/format.ts";
import { HERE, join, type Options, type Plan, sleep } from "../harness/plan.ts";
import { fsyncHistogram, fsyncNote } from "../harness/probes.ts";
import { clientResult, runClient, spawnServer, withBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

/** The long-poll consumers of the end-to-end rows: limit, and how they ack. */
const E2E_CONSUMERS = [
  { section: "4a", limit: 1, mode: "ack" },
  { section: "4b", limit: 100, mode: "ack" },
  { section: "4c", limit: 100, mode: "auto" },
] as const;

/** One row per consumer of E2E_CONSUMERS. */
export async function e2e(o: Options, p: Plan): Promise<void> {
  for (const c of E2E_CONSUMERS) await e2eRow(o, p, c);
}

interface E2eRun {
  pub: { sent: number; failed: number; rate: number };
  sub: {
    received: number;
    polls: number;
    ack_failed: number;
    p50_ms: number;
    p99_ms: number;
    max_ms: number;
    /** p50 of the first and the last 1,000 messages, in arrival order. */
    first_p50_ms: number;
    last_p50_ms: number;
  };
  /** Every message arrived, none failed. */
  complete: boolean;
}

/** The e2e_client pair against `url`: the consumer parks first, then the publisher runs. */
async function e2ePair(url: string, p: Plan, c: typeof E2E_CONSUMERS[number]): Promise<E2eRun> {
  const expected = Math.round(p.e2eRate * p.e2eRunS);
  await quiet();
  const subOut = runClient([
    "sub",
    url,
    "e2e",
    String(expected),
    String(p.e2eWarmS + p.e2eRunS + 30),
    String(c.limit),
    c.mode,
  ]);
  await sleep(500); // let the consumer start and park its first long-poll
  const pubOut = runClient([
    "pub",
    url,
    "e2e",
    String(p.e2eRate),
    String(p.e2eWarmS),
    String(p.e2eRunS),
  ]);
  const pub = await clientResult(pubOut);
  const sub = await clientResult(subOut);
  return { pub, sub, complete: sub.received === expected && pub.failed === 0 && !sub.ack_failed };
}

/** The same clients against the durable queue ceiling (tests/bench/ceiling_queue.ts). */
async function e2eCeiling(p: Plan, c: typeof E2E_CONSUMERS[number]): Promise<E2eRun> {
  const dir = await tempDir("ferry-bench-queue-");
  const srv = await spawnServer(join(HERE, "ceiling_queue.ts"), ["--dir", dir], ["-A"]);
  try {
    return await e2ePair(srv.url, p, c);
  } finally {
    await srv.stop("SIGKILL");
    await removeDir(dir);
  }
}

async function e2eRow(
  o: Options,
  p: Plan,
  c: typeof E2E_CONSUMERS[number],
): Promise<void> {
  const expected = Math.round(p.e2eRate * p.e2eRunS);
  const { pub: pubR, sub: subR, complete, fsync } = await withBroker(o, 1_000_000, async (b) => {
    const fs0 = await fsyncHistogram(b.url);
    const run = await e2ePair(b.url, p, c);
    return { ...run, fsync: fsyncNote(fs0, await fsyncHistogram(b.url)) };
  });
  const busy = await busyNote(); // over Ferry's run, before the ceiling's
  log(
    `e2e limit=${c.limit} ${c.mode}: p50 ${subR.p50_ms.toFixed(2)} ms p99 ${
      subR.p99_ms.toFixed(2)
    } ms over ${subR.received}`,
  );
  const ceil = await e2eCeiling(p, c);
  log(
    `e2e ceiling limit=${c.limit} ${c.mode}: p50 ${ceil.sub.p50_ms.toFixed(2)} ms p99 ${
      ceil.sub.p99_ms.toFixed(2)
    } ms`,
  );
  row({
    section: c.section,
    measure: `end-to-end latency, ${int(p.e2eRate)} msg/s, long-poll \`limit=${c.limit}\`, ` +
      (c.mode === "auto" ? "`auto_ack`" : c.limit === 1 ? "ack each" : "batch ack"),
    conns: "",
    result: `${int(subR.received)} msgs`,
    p50: `${subR.p50_ms.toFixed(2)} ms`,
    p99: `${subR.p99_ms.toFixed(2)} ms`,
    notes: [
      `over ${p.e2eRunS} s after ${p.e2eWarmS} s warm-up; max ${subR.max_ms.toFixed(1)} ms`,
      `p50 of the first 1,000 ${subR.first_p50_ms.toFixed(1)} ms, of the last 1,000 ${
        subR.last_p50_ms.toFixed(1)
      } ms`,
      `publisher ${int(pubR.rate)} msg/s`,
      `${int(subR.polls)} polls`,
      fsync,
      pubR.failed ? `${pubR.failed} publishes failed` : "",
      subR.ack_failed ? `${subR.ack_failed} acks failed` : "",
      subR.received !== expected ? `expected ${int(expected)}` : "",
      `the durable queue ceiling with the same clients: p50 ${ceil.sub.p50_ms.toFixed(2)} ms, p99 ${
        ceil.sub.p99_ms.toFixed(2)
      } ms (first 1,000 ${ceil.sub.first_p50_ms.toFixed(1)} ms, last 1,000 ${
        ceil.sub.last_p50_ms.toFixed(1)
      } ms)${ceil.complete ? "" : " (incomplete)"}`,
      busy,
    ].filter(Boolean).join("; "),
    target: "p99 ≤ 2 ms, keeps up",
    status: complete ? verdict(subR.p99_ms <= 2) : "FAIL",
  });
}
