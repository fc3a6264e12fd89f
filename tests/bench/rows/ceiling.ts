/**
 * @module Section `ceiling` (rows 1): what this machine allows at all. Bare Deno.serve
 * (tests/bench/ceiling.ts) at 1/16/64 connections; the least a durable queue does under Ferry's
 * contract (tests/bench/ceiling_queue.ts) at 1 and 64, and at 64 with `--bare`; and the disk:
 * 1, 64 and 1,000 records of 1 KiB per write + fdatasync. Later rows quote these figures.
 */

import { removeDir, tempDir } from "../harness/cleanup.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log, ms, pct } from "../harness/format.ts";
import { CONNS, HERE, join, KIB, type Options, type Plan } from "../harness/plan.ts";
import { spawnServer } from "../harness/spawn.ts";
import { errorsOf, wrkTimed } from "../harness/wrk.ts";
import { figures, row } from "../report.ts";

/** The HTTP, durable-queue and disk ceilings, in that order. */
export async function ceiling(o: Options, p: Plan): Promise<void> {
  await httpCeiling(o, p);
  await queueCeiling(o, p);
  await disk(o, p);
}

/**
 * The least a durable queue does under Ferry's contract (tests/bench/ceiling_queue.ts): list
 * the headers for X-MQ-*, read the body, group-commit it to a file (one write + fdatasync per
 * batch) where the brokers keep their WALs, answer 201. What a durable publish over Deno.serve
 * allows here at all, at 1 and 64 connections; and at 64 with `--bare` (no header listing, no
 * durable acks), for what the contract's part costs.
 */
async function queueCeiling(_o: Options, p: Plan): Promise<void> {
  for (const bare of [false, true]) {
    const dir = await tempDir("ferry-bench-queue-");
    const srv = await spawnServer(
      join(HERE, "ceiling_queue.ts"),
      ["--dir", dir, ...(bare ? ["--bare"] : [])],
      ["-A"],
    );
    try {
      for (const c of bare ? [64] : [1, 64]) {
        const run = { script: "publish.lua", url: `${srv.url}/publish/q`, threads: 1, conns: c };
        await quiet();
        await wrkTimed({ ...run, seconds: p.warmS, args: ["1024"] });
        const w = await wrkTimed({ ...run, seconds: p.runS, args: ["1024"] });
        const rate = (w.requests - w.status_errors) / (w.duration_us / 1e6);
        if (!bare) figures.queue.set(c, rate);
        const ceil = figures.ceiling.get(c);
        log(`queue ceiling${bare ? " --bare" : ""} c=${c}: ${int(rate)} req/s`);
        row({
          section: "1",
          measure: bare
            ? "the same without the header listing (`--bare`), req/s"
            : "durable queue ceiling: 1 KiB POST → group commit → 201, req/s",
          conns: String(c),
          result: int(rate),
          p50: ms(w.p50_us),
          p99: ms(w.p99_us),
          notes: [
            bare
              ? "what listing the request headers (for X-MQ-*) costs: compare the row above"
              : "tests/bench/ceiling_queue.ts: lists headers for X-MQ-*; no topics, ids or checks",
            ceil ? `${pct(rate / ceil)} of the HTTP ceiling` : "",
            errorsOf(w),
            await busyNote(),
          ].filter(Boolean).join("; "),
        });
      }
    } finally {
      await srv.stop("SIGKILL");
      await removeDir(dir);
    }
  }
}

async function httpCeiling(_o: Options, p: Plan): Promise<void> {
  const srv = await spawnServer(join(HERE, "ceiling.ts"), ["--port", "0"], ["-A"]);
  try {
    for (const c of CONNS) {
      const run = {
        script: "publish.lua",
        url: `${srv.url}/publish/ceiling`,
        threads: 1,
        conns: c,
      };
      await quiet();
      await wrkTimed({ ...run, seconds: p.warmS, args: ["1024"] });
      const w = await wrkTimed({ ...run, seconds: p.runS, args: ["1024"] });
      const rate = (w.requests - w.status_errors) / (w.duration_us / 1e6);
      figures.ceiling.set(c, rate);
      log(`ceiling c=${c}: ${int(rate)} req/s`);
      row({
        section: "1",
        measure: "HTTP ceiling: bare Deno.serve, 1 KiB POST → 201, req/s",
        conns: String(c),
        result: int(rate),
        p50: ms(w.p50_us),
        p99: ms(w.p99_us),
        notes: [errorsOf(w), await busyNote()].filter(Boolean).join("; "),
      });
    }
  } finally {
    await srv.stop("SIGKILL");
  }
}

/**
 * What the disk allows a durable publish at all, measured where the brokers keep their WALs:
 * 1 KiB records appended with one write + fdatasync each (the floor of a publish at one
 * connection), and group-committed 64 to a write + fdatasync (what 64 connections could get).
 * Synchronous calls, the fastest way Deno has (measured on these machines).
 */
function diskRate(
  dir: string,
  perSync: number,
  seconds: number,
): { rate: number; syncs: number[] } {
  const file = Deno.openSync(join(dir, `disk-${perSync}`), { write: true, create: true });
  const buf = new Uint8Array(perSync * KIB).fill(120);
  const syncs: number[] = [];
  const end = performance.now() + seconds * 1000;
  try {
    while (performance.now() < end) {
      const t0 = performance.now();
      for (let pos = 0; pos < buf.length;) pos += file.writeSync(buf.subarray(pos));
      file.syncDataSync();
      syncs.push(performance.now() - t0);
    }
  } finally {
    file.close();
  }
  const took = syncs.reduce((a, b) => a + b, 0);
  return { rate: (syncs.length * perSync) / (took / 1000), syncs: syncs.sort((a, b) => a - b) };
}

async function disk(_o: Options, p: Plan): Promise<void> {
  const dir = await tempDir("ferry-bench-disk-");
  try {
    for (const perSync of [1, 64, 1_000]) {
      await quiet();
      const { rate, syncs } = diskRate(dir, perSync, p.runS);
      figures.disk.set(perSync, rate);
      const q = (f: number) => `${syncs[Math.floor(f * (syncs.length - 1))]!.toFixed(2)} ms`;
      log(`disk ${perSync} per fdatasync: ${int(rate)} records/s`);
      row({
        section: "1",
        measure: perSync === 1
          ? "disk ceiling: 1 KiB write + fdatasync each, records/s"
          : `disk ceiling: ${int(perSync)} × 1 KiB per write + fdatasync, records/s`,
        conns: perSync === 1_000 ? "" : String(perSync),
        result: int(rate),
        p50: q(0.5),
        p99: q(0.99),
        notes: [`${int(syncs.length)} fdatasyncs`, await busyNote()].filter(Boolean).join("; "),
      });
    }
  } finally {
    await removeDir(dir);
  }
}
