/**
 * @module Sections `publish` (rows 2) and `batch` (row 2b): POST /publish with 1 KiB bodies at
 * 1/16/64 connections against the ceilings and the disk, the Go client's `Publish` from 64
 * goroutines beside wrk's row at 64, and batch publishes of 100 × 1 KiB beside bare Deno.serve
 * reading the same bodies.
 */

import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log, ms, pct } from "../harness/format.ts";
import { goBench, runGo } from "../harness/go.ts";
import { CONNS, HERE, join, type Options, type Plan } from "../harness/plan.ts";
import { fsyncHistogram, fsyncNote } from "../harness/probes.ts";
import { spawnServer, withBroker } from "../harness/spawn.ts";
import { errorsOf, type WrkResult, wrkTimed } from "../harness/wrk.ts";
import { figures, row, type Status, verdict } from "../report.ts";

/** wrk publishing 1 KiB at 1/16/64 connections, a fresh broker each. */
export async function publish(o: Options, p: Plan): Promise<void> {
  for (const c of CONNS) {
    await withBroker(o, 10_000_000, async (b) => {
      const run = { script: "publish.lua", threads: 1, conns: c, args: ["1024"] };
      await quiet();
      await wrkTimed({ ...run, url: `${b.url}/publish/warm-${c}`, seconds: p.warmS });
      const fs0 = await fsyncHistogram(b.url);
      const w = await wrkTimed({ ...run, url: `${b.url}/publish/bench-${c}`, seconds: p.runS });
      const fs1 = await fsyncHistogram(b.url);
      const rate = (w.requests - w.status_errors) / (w.duration_us / 1e6);
      figures.publish.set(c, rate);
      const ceil = figures.ceiling.get(c);
      const share = ceil ? rate / ceil : NaN;
      log(`publish c=${c}: ${int(rate)} msg/s p99 ${ms(w.p99_us)}`);
      const floor = figures.disk.get(1);
      const ofDisk = floor ? rate / floor : NaN;
      // One client waits for each answer, so each publish takes at least a bare round trip
      // (the ceiling at 1 connection) plus one fdatasync (the disk row): nothing overlaps them.
      const ceil1 = figures.ceiling.get(1);
      const sequential = ceil1 && floor ? 1 / (1 / ceil1 + 1 / floor) : NaN;
      let target = "", status: Status = "";
      if (c === 64) {
        target = "≥ 80 % of ceiling";
        status = ceil ? verdict(share >= 0.8) : "n/a";
      } else if (c === 1) {
        target = "≥ 80 % of one fdatasync each, p99 ≤ 2 ms";
        status = floor ? verdict(ofDisk >= 0.8 && w.p99_us <= 2_000) : "n/a";
      }
      row({
        section: "2",
        measure: "publish 1 KiB (fsync always), msg/s",
        conns: String(c),
        result: int(rate),
        p50: ms(w.p50_us),
        p99: ms(w.p99_us),
        notes: [
          ceil ? `${pct(share)} of ceiling` : "no ceiling run",
          figures.queue.get(c) && ceil
            ? `the durable queue ceiling: ${pct(figures.queue.get(c)! / ceil)} of ceiling`
            : "",
          c === 1 && floor ? `${pct(ofDisk)} of one fdatasync each` : "",
          c === 1 && sequential
            ? `one client cannot pass a bare round trip + one fdatasync each: ${
              int(sequential)
            } msg/s, ${pct(sequential / floor!)} of one fdatasync each (${
              pct(rate / sequential)
            } of that)`
            : "",
          fsyncNote(fs0, fs1, w.requests - w.status_errors),
          errorsOf(w),
          await busyNote(),
        ].filter(Boolean).join("; "),
        target,
        status: w.status_errors ? "FAIL" : status,
      });
    });
  }
}

/** Messages per request and connections of the batch-publish row. */
const BATCH_COUNT = 100;
const BATCH_CONNS = 16;

/**
 * batch: POST /publish/bench/batch with 100 messages of 1 KiB (Base64 in a JSON array) over 16
 * connections; messages/s, beside the bare Deno.serve ceiling (tests/bench/ceiling.ts) reading
 * the same 140 KB bodies in the same run. Target: ≥ 250,000 msg/s.
 */
export async function batch(o: Options, p: Plan): Promise<void> {
  const run = {
    script: "publish_batch.lua",
    threads: 1,
    conns: BATCH_CONNS,
    args: [String(BATCH_COUNT), "1024"],
  };
  const msgsPerSecond = (w: WrkResult) =>
    (w.requests - w.status_errors) * BATCH_COUNT / (w.duration_us / 1e6);
  const srv = await spawnServer(join(HERE, "ceiling.ts"), ["--port", "0"], ["-A"]);
  let ceil: number;
  try {
    await quiet();
    await wrkTimed({ ...run, url: `${srv.url}/publish/ceiling/batch`, seconds: p.warmS });
    ceil = msgsPerSecond(
      await wrkTimed({ ...run, url: `${srv.url}/publish/ceiling/batch`, seconds: p.runS }),
    );
  } finally {
    await srv.stop("SIGKILL");
  }
  log(`batch ceiling c=${BATCH_CONNS}: ${int(ceil)} msg/s`);
  await withBroker(o, 100_000_000, async (b) => {
    await quiet();
    await wrkTimed({ ...run, url: `${b.url}/publish/warm/batch`, seconds: p.warmS });
    const fs0 = await fsyncHistogram(b.url);
    const w = await wrkTimed({ ...run, url: `${b.url}/publish/bench/batch`, seconds: p.runS });
    const fs1 = await fsyncHistogram(b.url);
    const requests = w.requests - w.status_errors;
    const rate = msgsPerSecond(w);
    log(`batch c=${BATCH_CONNS}: ${int(rate)} msg/s p99 ${ms(w.p99_us)}`);
    row({
      section: "2b",
      measure: `batch publish, ${BATCH_COUNT} × 1 KiB a request, msg/s`,
      conns: String(BATCH_CONNS),
      result: int(rate),
      p50: ms(w.p50_us),
      p99: ms(w.p99_us),
      notes: [
        `${int(requests / (w.duration_us / 1e6))} req/s`,
        `${pct(rate / ceil)} of bare Deno.serve reading the same bodies (${int(ceil)} msg/s)`,
        figures.disk.get(1_000)
          ? `${pct(rate / figures.disk.get(1_000)!)} of the disk at 1,000 records a fdatasync`
          : "",
        fsyncNote(fs0, fs1, requests * BATCH_COUNT),
        errorsOf(w),
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "≥ 250,000 msg/s",
      status: w.status_errors ? "FAIL" : verdict(rate >= 250_000),
    });
  });
}

/** The Go client's Publish of 1 KiB from 64 goroutines, beside wrk's publish row at 64. */
export async function goPublish(o: Options, p: Plan): Promise<void> {
  const c = 64;
  await goBench();
  await withBroker(o, 10_000_000, async (b) => {
    await quiet();
    const fs0 = await fsyncHistogram(b.url);
    const r = await runGo([
      "-url",
      b.url,
      "-mode",
      "publish",
      "-topic",
      `go-${c}`,
      "-c",
      String(c),
      "-d",
      `${p.runS}s`,
      "-warm",
      `${p.warmS}s`,
    ]);
    const fs1 = await fsyncHistogram(b.url);
    const wrk = figures.publish.get(c);
    const ceil = figures.ceiling.get(c);
    log(`go publish c=${c}: ${int(r.rate)} msg/s p99 ${ms(r.p99_us)}`);
    row({
      section: "2",
      measure: "Go client `Publish` 1 KiB from 64 goroutines, msg/s",
      conns: String(c),
      result: int(r.rate),
      p50: ms(r.p50_us),
      p99: ms(r.p99_us),
      notes: [
        `${int(r.sent)} in ${r.seconds.toFixed(2)} s (after ${p.warmS} s of warm-up)`,
        wrk ? `${pct(r.rate / wrk)} of wrk's publish @64` : "",
        ceil ? `${pct(r.rate / ceil)} of ceiling` : "",
        r.errors ? `${int(r.errors)} errors` : "",
        fsyncNote(fs0, fs1),
        await busyNote(),
      ].filter(Boolean).join("; "),
      status: r.errors ? "FAIL" : "",
    });
  });
}
