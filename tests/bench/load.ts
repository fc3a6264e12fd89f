/**
 * Load benchmark of the real broker over HTTP: `deno task bench` (= `deno run -A
 * tests/bench/load.ts`). Prints one markdown table, machine first, with a PASS/FAIL column.
 * A full run (every section, not --quick, this checkout's main.ts, the start task's flags, no
 * section failed) also writes it into docs/benchmarks.md between `<!-- bench:table:start -->`
 * and `<!-- bench:table:end -->`; any other run leaves that page alone (tests/bench/docs_table.ts).
 *
 * Usage:
 *   deno task bench                      full run, about 15 minutes on 2 cores; updates the page
 *   deno task bench --quick              smoke run, about 1 minute (shorter runs, fewer messages)
 *   deno task bench --only publish,consume   just the publish and drain rows (Go's too)
 *   deno task bench --broker path/to/main.ts   bench another build (default: ./main.ts)
 *   deno task bench --table-file FILE    also write this run's table into FILE (which has the
 *                                        two markers), whatever the run
 *
 * Sections (names for --only): ceiling, publish, consume, e2e, fanout, webhook, rss, replay,
 * large, cluster, batch, idle, restart.
 *   ceiling  bare Deno.serve (tests/bench/ceiling.ts) answering a 1 KiB POST, req/s at 1/16/64
 *            connections: what one Deno process can do at all. Then the least a durable queue
 *            does under Ferry's contract (tests/bench/ceiling_queue.ts: list the headers for
 *            X-MQ-*, read, group-commit to a file, answer) at 1 and 64 connections, and at 64
 *            without the header listing (`--bare`). Then the disk, in this process:
 *            1 KiB write + fdatasync each (the floor of a durable publish at one connection),
 *            64 records per write + fdatasync (what group commit can reach at 64 connections),
 *            and 1,000 (what batch publish's large group commits can reach).
 *   publish  POST /publish/bench-N with 1 KiB bodies at 1/16/64 connections; msg/s, p50/p99,
 *            share of the ceilings. Targets: 64 conns ≥ 80 % of the HTTP ceiling; 1 conn
 *            ≥ 80 % of one fdatasync each, with p99 ≤ 2 ms. The 1-conn row also prints what
 *            one waiting client can reach at all: a bare round trip + one fdatasync each.
 *            Then the Go client's `Publish` from 64 goroutines for as long (clients/go/
 *            internal/bench, built once with `go build`), next to wrk's row at 64.
 *   consume  drain 100,000 pre-published 1 KiB messages with consume+ack, limit=1 (ack one by
 *            one) and limit=100 (batch ack). Target: limit=100 ≥ 250,000 msg/s. First the
 *            drain's ceiling: tests/bench/ceiling.ts answering prebuilt 100-message consumes and
 *            acks to the same wrk script; and, in this process, what building the answers
 *            (routes/wire.ts) costs per message.
 *            Then the same drain through the client library's `messages()` loop (8 loops of
 *            batch 100 in one process, tests/bench/client_drain.ts), next to the limit=100 row,
 *            and through the Go client's `Process` (8 loops of Prefetch 100, batch acks;
 *            clients/go/internal/bench). Target: Go ≥ 80 % of the limit=100 row.
 *   e2e      2,000 msg/s published by one process, long-polled (timeout=5s) by another:
 *            limit=1 acking each message, limit=100 batch-acking (acks are not awaited before
 *            the next poll), and limit=100 with auto_ack (each answer waits for its ack to be
 *            durable); send→receive latency p50/p99. Target: p99 ≤ 2 ms, and every message
 *            received (the consumer keeps up). Each row then runs the same clients against
 *            tests/bench/ceiling_queue.ts (durable publishes and acks) and quotes its p50/p99.
 *   fanout   2,000 msg/s of 128 B published by one process to 100 SSE streams (GET /stream),
 *            then to 100 WebSocket spies (GET /ws), read over raw TCP by another process;
 *            send→receive latency p50/p99 over every event, and the broker's CPU.
 *            Target: p99 ≤ 10 ms.
 *   webhook  100,000 (quick: 20,000) messages of 1 KiB published to a topic with one signed
 *            webhook (BROKER_WEBHOOK_CONCURRENCY=16) whose receiver, in this process, answers 204;
 *            messages/s delivered, from the first publish to the last POST. Target: ≥ 5,000.
 *   rss      broker VmRSS holding 100,000 messages of 1 KiB, 1 s after the fill. Target: ≤ 1.6 ×
 *            100,000 × 1024 B. Then a second broker with `--inspect`, filled the same way, whose
 *            full GC (forced by the harness) shows what is live.
 *   large    RSS holding 10,000 messages of 2 MiB (their payloads stay in the WAL file), and
 *            consume + auto-ack of 2,000 messages of 256 KiB read from disk and from memory.
 *   cluster  a three-node cluster on a real etcd (Debian's etcd-server): publish at 1/16/64
 *            connections to the leader (each 2xx waits for a follower's fsync), next to the
 *            standalone figures of `publish`; end-to-end latency as in e2e; then failover time
 *            over 20 (quick: 3) leader SIGKILLs under load (tests/cluster/chaos.ts), min/median/
 *            max. Targets: publish @64 ≥ 50 % of standalone; failover median ≤ 3 s.
 *   restart  4 topics churned like the crash loop (tools/crash_loop.ts): rounds of small publishes,
 *            consumes of up to 10, ~90 % acked, the rest left leased, each round ended by SIGKILL
 *            mid-traffic and the next begun by draining the backlog; then spawn → listening of
 *            the restart, and of a second restart 2 s later. Target ≤ 150 ms (the first).
 *   idle     CPU of a started broker with 4 topics, groups, a webhook and an open long-poll,
 *            left alone: utime+stime over 30 s (quick: 10 s) after 40 s to settle (V8's memory
 *            reducer and Deno's idle threads wind down 20-40 s after traffic). Target ≤ 0.1 %.
 *   replay   two WALs of 1,000,000 records of 64 B (one topic), broker restarted on each:
 *            all publishes, all held (worst case); and half publishes, half acks (steady state).
 *            records/s from the "recovered" log line. Target: ≥ 1,000,000 records/s. Beside
 *            each, the floor: the same files read and checked, then decoded, with nothing
 *            applied (tests/bench/replay_floor.ts).
 *
 * How: every broker is a child `deno run <the start task's permissions> main.ts --port 0
 * --data-dir <temp> --fsync always` on 127.0.0.1, fresh per measurement (no topic reaches the
 * per-topic cap, no run pays for the previous one's garbage). Load comes from wrk
 * (`/usr/bin/wrk`, `apt-get install -y wrk`), one thread for the publish and ceiling runs so
 * the other core is the server's; the Lua scripts are
 * in tests/bench/wrk/ and print one `FERRY_RESULT {json}` line from done(). Consumers run 8
 * connections, one per wrk thread, so each thread alternates consume and ack. Fill and drain
 * ends are found by polling GET /api/stats every 10 ms, then wrk is stopped with SIGINT.
 * Latencies are wrk's per-request figures (closed loop: a slow answer delays the next request).
 * The e2e and fan-out sections use tests/bench/e2e_client.ts: one process each for publisher
 * and consumer, speaking HTTP/1.1 over their own connections (tests/bench/raw_http.ts).
 * Publish, consume and e2e rows quote the broker's fsync histogram (GET /metrics) over the run.
 * The RSS row's broker runs as the start task does; `--inspect` (24–30 MiB more RSS after a fill)
 * only on the second broker, whose full GC the harness forces to read the JS heap.
 * The replay WAL is written with `--fsync never` (same bytes, a minute faster), replayed with
 * `always`.
 *
 * Shared machines: before each measured run the harness waits (up to 60 s) for the CPUs to be
 * idle, and it counts the CPU that processes outside its own tree use during the run; a row
 * where that passed 20 % says BUSY in its notes. Figures drift 10-20 % between runs anyway.
 */

import { Broker, type Handed } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { messagesText } from "../../routes/wire.ts";
import { startEtcd } from "../_support/etcd.ts";
import { runChaos } from "../cluster/chaos.ts";
import { cleanup, removeDir, tempDir } from "./harness/cleanup.ts";
import { busyNote, procTicks, quiet } from "./harness/cpu.ts";
import { int, log, ms, pct } from "./harness/format.ts";
import { goBench, runGo } from "./harness/go.ts";
import { loadAvg } from "./harness/machine.ts";
import { forceGc, vmRss } from "./harness/memory.ts";
import {
  CONNS,
  FULL,
  HERE,
  join,
  KIB,
  MIB,
  type Options,
  type Plan,
  POLL_MS,
  QUICK,
  ROOT,
  type Section,
  SECTIONS,
  sleep,
} from "./harness/plan.ts";
import {
  dirBytes,
  fill,
  fsyncHistogram,
  fsyncNote,
  type TopicStats,
  topicStats,
  zeroTailBytes,
} from "./harness/probes.ts";
import {
  BROKER_RUNTIME_ENV,
  BROKER_RUNTIME_FLAGS,
  clientResult,
  runClient,
  type Server,
  spawnServer,
  startBroker,
  withBroker,
} from "./harness/spawn.ts";
import { errorsOf, type WrkResult, wrkTimed, wrkUntil } from "./harness/wrk.ts";
import { figures, report, row, type Status, verdict } from "./report.ts";

function parseArgs(args: string[]): Options {
  const o: Options = { quick: false, only: new Set(SECTIONS), broker: join(ROOT, "main.ts") };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--quick") o.quick = true;
    else if (a === "--only" || a.startsWith("--only=")) {
      const v = a.includes("=") ? a.slice(7) : args[++i] ?? "";
      const names = v.split(",").map((s) => s.trim()).filter(Boolean);
      for (const n of names) {
        if (!(SECTIONS as readonly string[]).includes(n)) {
          throw new Error(`unknown section "${n}" (one of ${SECTIONS.join(", ")})`);
        }
      }
      o.only = new Set(names as Section[]);
    } else if (a === "--broker") o.broker = args[++i] ?? "";
    else if (a === "--table-file") o.tableFile = args[++i] ?? "";
    else if (a === "--help" || a === "-h") {
      console.log(
        "usage: deno task bench [--quick] [--only " + SECTIONS.join(",") + "]" +
          " [--broker main.ts] [--table-file FILE]",
      );
      Deno.exit(0);
    } else throw new Error(`unknown argument "${a}" (see --help)`);
  }
  return o;
}

async function ceiling(o: Options, p: Plan): Promise<void> {
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

async function publish(o: Options, p: Plan): Promise<void> {
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
async function batch(o: Options, p: Plan): Promise<void> {
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

/**
 * The drain's ceiling: tests/bench/ceiling.ts answering every consume with one prebuilt array of
 * 100 messages of 1 KiB and every batch ack with its count, drained by the same consume script
 * and connections as row 3b. Messages/s: what HTTP and wrk allow a drain at all here.
 */
async function drainCeiling(p: Plan): Promise<number> {
  const srv = await spawnServer(join(HERE, "ceiling.ts"), ["--port", "0"], ["-A"]);
  try {
    const run = {
      script: "consume.lua",
      url: srv.url,
      threads: p.drainConns,
      conns: p.drainConns,
      args: ["ceiling", "100"],
    };
    await quiet();
    await wrkTimed({ ...run, seconds: p.warmS });
    const w = await wrkTimed({ ...run, seconds: p.runS });
    const rate = (w.consumed ?? 0) / (w.duration_us / 1e6);
    log(`drain ceiling: ${int(rate)} msg/s`);
    row({
      section: "3b",
      measure: "drain ceiling: bare Deno.serve, prebuilt 100-message consumes + batch acks, msg/s",
      conns: String(p.drainConns),
      result: int(rate),
      p50: ms(w.p50_us),
      p99: ms(w.p99_us),
      notes: [errorsOf(w), await busyNote()].filter(Boolean).join("; "),
    });
    return rate;
  } finally {
    await srv.stop("SIGKILL");
  }
}

/**
 * What building a consume's answer costs the broker's one JS thread, in this process: µs per
 * message of routes/wire.ts's messagesText over 100 messages of 1 KiB (Base64, payload_text).
 */
async function answerCostUs(): Promise<number> {
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:", maxQueue: 1e9 }), {
    tick: false,
  });
  try {
    const payload = new Uint8Array(KIB).fill(120);
    for (let i = 0; i < 100; i++) await broker.publish("answer", payload.slice());
    const handed: Handed[] = await broker.consume("answer", { limit: 100, peek: true }, (h) => h);
    for (let i = 0; i < 200; i++) messagesText(handed); // warm the JIT
    const rounds = 2_000;
    const t0 = performance.now();
    for (let i = 0; i < rounds; i++) messagesText(handed);
    return (performance.now() - t0) * 1000 / (rounds * handed.length);
  } finally {
    await broker.close();
  }
}

async function consume(o: Options, p: Plan): Promise<void> {
  const ceil = await drainCeiling(p);
  await quiet();
  const answerUs = await answerCostUs();
  log(`answer building: ${answerUs.toFixed(2)} µs a message`);
  for (const limit of [1, 100]) {
    await withBroker(o, Math.max(200_000, p.drainCount * 2), async (b) => {
      const topic = `drain-${limit}`;
      const fillMs = await fill(b.url, topic, p.drainCount, KIB);
      log(`consume limit=${limit}: filled ${int(p.drainCount)} in ${int(fillMs)} ms, draining`);
      let last: TopicStats = { depth: -1, in_flight: -1 };
      await quiet();
      const fs0 = await fsyncHistogram(b.url);
      const { result: w, elapsedMs, finished } = await wrkUntil(
        {
          script: "consume.lua",
          url: b.url,
          threads: p.drainConns,
          conns: p.drainConns,
          seconds: 300,
          args: [topic, String(limit)],
        },
        async () => {
          last = await topicStats(b.url, topic);
          return last.depth === 0 && last.in_flight === 0;
        },
      );
      const fs1 = await fsyncHistogram(b.url);
      const rate = p.drainCount / (elapsedMs / 1000);
      figures.consume.set(limit, rate);
      log(`consume limit=${limit}: ${int(rate)} msg/s (acked ${w.acked})`);
      const notes = [
        `${int(p.drainCount)} in ${(elapsedMs / 1000).toFixed(2)} s`,
        `${int(w.requests)} requests (${int(w.empty ?? 0)} empty 404s), p50 ${ms(w.p50_us)}, p99 ${
          ms(w.p99_us)
        }, max ${ms(w.max_us)}`,
        fsyncNote(fs0, fs1),
        // stats show a drain as soon as the last acks are applied, a moment before their
        // answers (after the fsync) reach wrk; only a larger gap means lost acks
        (w.acked ?? 0) < p.drainCount - p.drainConns ? `acked only ${int(w.acked ?? 0)}` : "",
        w.failed ? `${int(w.failed)} failed answers` : "",
        finished ? "" : `NOT drained: depth ${last.depth}, in_flight ${last.in_flight}`,
        await busyNote(),
      ];
      let target = "", status: Status = "";
      if (limit === 100) {
        const pub64 = figures.publish.get(64);
        target = "≥ 250,000 msg/s";
        status = verdict(rate >= 250_000);
        if (pub64) notes.push(`${(rate / pub64).toFixed(2)} × publish @64`);
        notes.push(
          `${pct(rate / ceil)} of the drain ceiling`,
          `building the answers alone takes ${answerUs.toFixed(2)} µs a message in this ` +
            `process: ${pct(answerUs * 250_000 / 1e6)} of the broker's one JS thread at 250,000/s`,
        );
      }
      row({
        section: limit === 1 ? "3a" : "3b",
        measure: limit === 1
          ? "consume limit=1 + ack each, msg/s"
          : "consume limit=100 + batch ack, msg/s",
        conns: String(p.drainConns),
        result: int(rate),
        notes: notes.filter(Boolean).join("; "),
        target,
        status: finished ? status : "FAIL",
      });
    });
  }
}

/** The client library's messages() loop draining what 3b drained with raw HTTP. */
async function clientLoop(o: Options, p: Plan): Promise<void> {
  const batch = 100;
  await withBroker(o, Math.max(200_000, p.drainCount * 2), async (b) => {
    const topic = "drain-client";
    await fill(b.url, topic, p.drainCount, KIB);
    await quiet();
    const r = await clientResult(runClient([
      b.url,
      topic,
      String(p.drainCount),
      String(p.drainConns),
      String(batch),
    ], "client_drain.ts"));
    const left = await topicStats(b.url, topic);
    const raw = figures.consume.get(100);
    log(`consume via messages(): ${int(r.rate)} msg/s`);
    row({
      section: "3c",
      measure: `client messages() loop, batch ${batch} + batch ack, msg/s`,
      conns: String(p.drainConns),
      result: int(r.rate),
      notes: [
        `${int(r.taken)} in ${r.seconds.toFixed(2)} s; ${int(r.polls)} polls, ${int(r.acks)} acks`,
        raw ? `${pct(r.rate / raw)} of 3b` : "",
        left.depth || left.in_flight
          ? `NOT drained: ${left.depth} ready, ${left.in_flight} leased`
          : "",
        await busyNote(),
      ].filter(Boolean).join("; "),
      status: left.depth || left.in_flight ? "FAIL" : "",
    });
  });
}

/** The Go client's Publish of 1 KiB from 64 goroutines, beside wrk's publish row at 64. */
async function goPublish(o: Options, p: Plan): Promise<void> {
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

/** The Go client's Process (Prefetch 100, batch acks) draining what 3b drained with raw HTTP. */
async function goDrain(o: Options, p: Plan): Promise<void> {
  const prefetch = 100;
  await goBench();
  await withBroker(o, Math.max(200_000, p.drainCount * 2), async (b) => {
    const topic = "drain-go";
    await fill(b.url, topic, p.drainCount, KIB);
    await quiet();
    const r = await runGo([
      "-url",
      b.url,
      "-mode",
      "drain",
      "-topic",
      topic,
      "-n",
      String(p.drainCount),
      "-c",
      String(p.drainConns),
      "-prefetch",
      String(prefetch),
    ]);
    const left = await topicStats(b.url, topic);
    const raw = figures.consume.get(100);
    const drained = !left.depth && !left.in_flight;
    log(`consume via Go Process: ${int(r.rate)} msg/s`);
    row({
      section: "3d",
      measure: `Go client \`Process\`, Prefetch ${prefetch} + batch ack, msg/s`,
      conns: String(p.drainConns),
      result: int(r.rate),
      notes: [
        `${int(r.taken)} in ${r.seconds.toFixed(2)} s, all acked; ${int(r.polls)} polls, ${
          int(r.acks)
        } acks`,
        raw ? `${pct(r.rate / raw)} of 3b` : "no 3b run",
        drained ? "" : `NOT drained: ${left.depth} ready, ${left.in_flight} leased`,
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "≥ 80 % of 3b (raw limit=100 + batch ack)",
      status: drained ? (raw ? verdict(r.rate >= 0.8 * raw) : "n/a") : "FAIL",
    });
  });
}

/** The long-poll consumers of the end-to-end rows: limit, and how they ack. */
const E2E_CONSUMERS = [
  { section: "4a", limit: 1, mode: "ack" },
  { section: "4b", limit: 100, mode: "ack" },
  { section: "4c", limit: 100, mode: "auto" },
] as const;

async function e2e(o: Options, p: Plan): Promise<void> {
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

/** Bytes of each fan-out message: small, so the row measures the fan-out, not Base64. */
const FANOUT_BYTES = 128;
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100;

async function fanout(o: Options, p: Plan): Promise<void> {
  await fanoutRow(o, p, "sse");
  await fanoutRow(o, p, "ws");
}

async function fanoutRow(o: Options, p: Plan, kind: "sse" | "ws"): Promise<void> {
  await withBroker(o, 1_000_000, async (b) => {
    const topic = "fanout";
    const expected = Math.round(p.e2eRate * p.e2eRunS);
    const created = await fetch(`${b.url}/api/topics`, {
      method: "POST",
      body: JSON.stringify({ name: topic }),
    });
    await created.body?.cancel();
    await quiet();
    const subOut = runClient([
      kind,
      b.url,
      topic,
      String(p.fanoutStreams),
      String(expected),
      String(p.e2eWarmS + p.e2eRunS + 30),
    ]);
    // Every stream is subscribed before the first publish.
    const subscribed = new RegExp(`^ferry_stream_subscribers\\{topic="${topic}"\\} (\\d+)`, "m");
    for (let waited = 0;; waited += POLL_MS) {
      const text = await (await fetch(`${b.url}/metrics`)).text();
      if (Number(subscribed.exec(text)?.[1] ?? 0) >= p.fanoutStreams) break;
      if (waited > 30_000) throw new Error(`the ${kind} streams did not all open within 30 s`);
      await sleep(POLL_MS);
    }
    const cpu0 = await procTicks(b.pid);
    const t0 = performance.now();
    const pubOut = runClient([
      "pub",
      b.url,
      topic,
      String(p.e2eRate),
      String(p.e2eWarmS),
      String(p.e2eRunS),
      String(FANOUT_BYTES),
    ]);
    const pubR = await clientResult(pubOut);
    const subR = await clientResult(subOut);
    const cpuShare = (await procTicks(b.pid) - cpu0) / TICKS_PER_S /
      ((performance.now() - t0) / 1000);
    const events = expected * p.fanoutStreams;
    log(`fanout ${kind}: p50 ${subR.p50_ms.toFixed(2)} ms p99 ${subR.p99_ms.toFixed(2)} ms`);
    const complete = subR.received === events && pubR.failed === 0;
    row({
      section: kind === "sse" ? "8a" : "8b",
      measure: `${kind === "sse" ? "SSE" : "WebSocket"} fan-out, ${
        int(p.e2eRate)
      } msg/s of ${FANOUT_BYTES} B to ${p.fanoutStreams} ${
        kind === "sse" ? "streams" : "spy sockets"
      }`,
      conns: String(p.fanoutStreams),
      result: `${int(subR.received)} events`,
      p50: `${subR.p50_ms.toFixed(2)} ms`,
      p99: `${subR.p99_ms.toFixed(2)} ms`,
      notes: [
        `over ${p.e2eRunS} s after ${p.e2eWarmS} s warm-up; max ${subR.max_ms.toFixed(1)} ms`,
        `broker CPU ${Math.round(cpuShare * 100)} % of one core (publishes + fan-out)`,
        `publisher ${int(pubR.rate)} msg/s; the readers share the 2 cores`,
        subR.received !== events ? `expected ${int(events)} (${subR.failed} streams failed)` : "",
        pubR.failed ? `${pubR.failed} publishes failed` : "",
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "p99 ≤ 10 ms, keeps up",
      status: complete ? verdict(subR.p99_ms <= 10) : "FAIL",
    });
  });
}

async function webhook(o: Options, p: Plan): Promise<void> {
  const count = p.drainCount;
  let got = 0;
  const all = Promise.withResolvers<void>();
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      await req.body?.cancel();
      if (++got === count) all.resolve();
      return new Response(null, { status: 204 });
    },
  );
  try {
    await withBroker(
      o,
      Math.max(200_000, count * 2),
      async (b) => {
        const reg = await fetch(`${b.url}/webhook/hooked`, {
          method: "POST",
          body: JSON.stringify({
            url: `http://127.0.0.1:${receiver.addr.port}/hook`,
            secret: `whsec_${btoa("a bench secret of 32 bytes long!")}`,
          }),
        });
        if (reg.status !== 201) {
          throw new Error(`webhook registration: ${reg.status} ${await reg.text()}`);
        }
        await quiet();
        const t0 = performance.now();
        const fillMs = await fill(b.url, "hooked", count, KIB);
        // From here on the broker only pushes: the backlog left when publishing ended.
        const [gotAtFill, tFill] = [got, performance.now()];
        const timeout = sleep(120_000).then(() => "timeout" as const);
        const done = await Promise.race([all.promise.then(() => "done" as const), timeout]);
        const end = performance.now();
        const overall = got / ((end - t0) / 1000);
        const backlog = got - gotAtFill;
        const rate = backlog > count / 10 ? backlog / ((end - tFill) / 1000) : overall;
        log(`webhook: ${int(got)} delivered; ${int(rate)} msg/s draining the backlog`);
        row({
          section: "9",
          measure: "webhook push, 1 KiB signed, 16 in flight, msg/s delivered from a backlog",
          conns: "16",
          result: int(rate),
          notes: [
            `${int(got)} of ${int(count)} POSTed ${
              ((end - t0) / 1000).toFixed(2)
            } s after the first publish (${
              int(overall)
            } msg/s counting the time publishing shared the CPU)`,
            `publishing took ${(fillMs / 1000).toFixed(2)} s; the rate is over the ${
              int(backlog)
            } left then`,
            done === "timeout" ? "gave up after 120 s" : "",
            "the receiver runs in the harness process",
            await busyNote(),
          ].filter(Boolean).join("; "),
          target: "≥ 5,000 msg/s",
          status: verdict(done === "done" && rate >= 5_000),
        });
      },
      [],
      ["--webhook-concurrency", "16"],
    );
  } finally {
    await receiver.shutdown();
  }
}

async function rss(o: Options, p: Plan): Promise<void> {
  const payload = p.rssCount * KIB;
  const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;
  const maxQueue = Math.max(200_000, p.rssCount * 2);
  // As `deno task start` runs it: an --inspect broker held 24–30 MiB more one second after the
  // fill (and 6 MiB more idle), so the forced GC below runs on a second broker of its own.
  const seen = await withBroker(o, maxQueue, async (b) => {
    await sleep(500);
    const idle = await vmRss(b.pid);
    await fill(b.url, "rss", p.rssCount, KIB);
    const first = await vmRss(b.pid);
    await sleep(1000);
    return { idle, first, settled: await vmRss(b.pid) };
  });
  let gcNote = "";
  await withBroker(o, maxQueue, async (b) => {
    if (!b.inspector) return void (gcNote = "no inspector: no forced GC");
    await fill(b.url, "rss", p.rssCount, KIB);
    try {
      const heap = await forceGc(b.inspector);
      await sleep(200);
      const after = await vmRss(b.pid);
      gcNote =
        `a broker with --inspect after a forced full GC ${mib(after.rss)} (${
          (after.rss / payload).toFixed(2)
        } ×), JS heap ${mib(heap.before.usedSize)} → ${mib(heap.after.usedSize)} used` +
        ` (${int((heap.after.usedSize) / p.rssCount)} B/message)` +
        (heap.after.backingStorageSize !== undefined
          ? `, ArrayBuffers ${mib(heap.after.backingStorageSize)}`
          : "");
    } catch (e) {
      gcNote = `forced GC failed: ${(e as Error).message}`;
    }
  }, ["--inspect=127.0.0.1:0"]);
  const { idle, first, settled } = seen;
  const ratio = settled.rss / payload;
  log(`rss: ${mib(settled.rss)} (${ratio.toFixed(2)} ×)`);
  row({
    section: "5",
    measure: `RSS holding ${int(p.rssCount)} × 1 KiB`,
    result: mib(settled.rss),
    notes: [
      `${ratio.toFixed(2)} × payload, read 1 s after the fill`,
      `idle ${mib(idle.rss)}, growth ${((settled.rss - idle.rss) / payload).toFixed(2)} × payload`,
      `right after fill ${mib(first.rss)}, peak ${mib(settled.hwm)}`,
      gcNote,
    ].join("; "),
    target: "≤ 1.6 × payload",
    status: verdict(ratio <= 1.6),
  });
}

async function replay(o: Options, p: Plan): Promise<void> {
  // Worst case: every record is a publish and every message is still held after the restart.
  const held = await tempDir("ferry-bench-replay-");
  const maxQueue = Math.max(2_000_000, p.replayCount * 2);
  try {
    // The WAL's bytes do not depend on the fsync mode; writing it unsynced saves most of a minute.
    const first = await startBroker(o, held, maxQueue, "never");
    let fillMs: number;
    try {
      fillMs = await fill(first.url, "replay", p.replayCount, 64);
    } finally {
      await first.stop("SIGTERM");
    }
    log(`replay: wrote ${int(p.replayCount)} records in ${int(fillMs)} ms, restarting`);
    await replayRow(o, held, maxQueue, {
      measure: `start-up replay, ${int(p.replayCount)} × 64 B publishes, all held, records/s`,
      expectHeld: p.replayCount,
    });
  } finally {
    await removeDir(held);
  }
  // Steady state: each message published, consumed and acked, so the WAL is half publishes and
  // half acks and little is held. Written in-process through the broker's own WAL writer.
  const steady = await tempDir("ferry-bench-replay-steady-");
  try {
    const pairs = Math.floor(p.replayCount / 2);
    const t0 = performance.now();
    await writeSteadyWal(steady, pairs);
    log(`replay: wrote ${int(pairs * 2)} records in ${int(performance.now() - t0)} ms, restarting`);
    await replayRow(o, steady, maxQueue, {
      measure: `start-up replay, ${int(pairs)} publishes + ${int(pairs)} acks, records/s`,
      expectHeld: 0,
    });
  } finally {
    await removeDir(steady);
  }
}

/** Publishes `pairs` 64 B messages and acks each with its own ACK record. */
async function writeSteadyWal(dir: string, pairs: number): Promise<void> {
  const { Broker } = await import("../../lib/broker.ts");
  const { defaultConfig } = await import("../../lib/config.ts");
  const broker = await Broker.open(
    defaultConfig({ dataDir: dir, fsync: "never", maxQueue: 1e9, compactMinBytes: 2 ** 40 }),
    { tick: false },
  );
  const payload = new Uint8Array(64).fill(0x61);
  const BATCH = 1000;
  for (let done = 0; done < pairs; done += BATCH) {
    const n = Math.min(BATCH, pairs - done);
    await Promise.all(Array.from({ length: n }, () => broker.publish("replay", payload)));
    const taken = await broker.consume("replay", { limit: n });
    await Promise.all(taken.map((m) => broker.ack("replay", "", [m.msg.id])));
  }
  await broker.close();
}

/**
 * Restarts a broker on `dir` and reports its "recovered" line as a replay row, beside the floor
 * of replaying the same files with nothing applied.
 */
async function replayRow(
  o: Options,
  dir: string,
  maxQueue: number,
  r: { measure: string; expectHeld: number },
): Promise<void> {
  const walBytes = await dirBytes(dir);
  // The floor reads the files before the broker does: once started, the broker may compact a
  // log it finds all dead (the steady one) down to a few records.
  const floor = await replayFloorNote(dir);
  await quiet();
  const second = await startBroker(o, dir, maxQueue);
  let records: number, durationMs: number, messages: number, held: number, busy: string;
  try {
    const rec = second.records.find((x) => x.msg === "recovered");
    if (!rec) throw new Error('no "recovered" log line');
    records = Number(rec.records);
    durationMs = Number(rec.duration_ms);
    messages = Number(rec.messages);
    if (!(records > 0 && durationMs > 0)) {
      throw new Error(`odd "recovered" line ${JSON.stringify(rec)}`);
    }
    held = (await topicStats(second.url, "replay")).depth;
    busy = await busyNote();
  } finally {
    await second.stop("SIGKILL");
  }
  const rate = records / (durationMs / 1000);
  log(`replay: ${int(records)} records in ${durationMs} ms = ${int(rate)} records/s`);
  row({
    section: "6",
    measure: r.measure,
    result: int(rate),
    notes: [
      `${int(records)} records, ${int(messages)} messages in ${durationMs.toFixed(0)} ms`,
      `spawn → listening ${int(second.listenMs)} ms`,
      `WAL ${(walBytes / MIB).toFixed(1)} MiB (written with --fsync never)`,
      held !== r.expectHeld ? `holds ${int(held)} after restart` : "",
      busy,
      floor.records === records ? "" : `the floor read ${int(floor.records)} records`,
      floor.note,
    ].filter(Boolean).join("; "),
    target: "≥ 1,000,000 records/s",
    status: held === r.expectHeld ? verdict(rate >= 1_000_000) : "FAIL",
  });
}

/**
 * What replaying `dir` costs with nothing applied (tests/bench/replay_floor.ts, with the broker's
 * runtime flags): the floor of the WAL format and its decoder under any message store.
 */
async function replayFloorNote(dir: string): Promise<{ records: number; note: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      ...BROKER_RUNTIME_FLAGS,
      new URL("./replay_floor.ts", import.meta.url).pathname,
      dir,
    ],
    env: BROKER_RUNTIME_ENV,
    stdin: "null",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`replay_floor.ts exited with ${out.code}`);
  const f = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    records: number;
    checked_ms: number;
    decoded_ms: number;
  };
  const rate = (ms: number) => int(f.records / (ms / 1000));
  return {
    records: f.records,
    note: `with nothing applied, the floor of this WAL format here: reading and checking ${
      rate(f.checked_ms)
    } records/s, and decoding them too (replayFile) ${rate(f.decoded_ms)}`,
  };
}

/** Takes every message of `topic` with auto-ack, `conns` loops of `limit`; messages per second. */
async function autoAckDrain(url: string, topic: string, count: number, limit: number) {
  let taken = 0;
  const t0 = performance.now();
  const loop = async () => {
    while (taken < count) {
      const res = await fetch(`${url}/consume/${topic}?limit=${limit}&auto_ack=true`);
      const text = await res.text();
      if (res.status === 404) continue;
      if (res.status !== 200) {
        throw new Error(`consume answered ${res.status}: ${text.slice(0, 200)}`);
      }
      taken += text.split('"retry_count"').length - 1;
    }
  };
  await Promise.all(Array.from({ length: 4 }, loop));
  return taken / ((performance.now() - t0) / 1000);
}

async function large(o: Options, p: Plan): Promise<void> {
  const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;
  await withBroker(o, Math.max(200_000, p.largeCount * 2), async (b) => {
    await sleep(500);
    const idle = await vmRss(b.pid);
    const fillMs = await fill(b.url, "large", p.largeCount, 2 * MIB);
    await sleep(1000);
    const settled = await vmRss(b.pid);
    // The request bodies of 64 connections are garbage V8 has not collected yet: collect it.
    if (b.inspector) await forceGc(b.inspector);
    await sleep(1000);
    const held = await vmRss(b.pid);
    const perMessage = (held.rss - idle.rss) / p.largeCount;
    const share = (held.rss - idle.rss) / (p.largeCount * 2 * MIB);
    log(`large: ${mib(held.rss)} holding ${int(p.largeCount)} × 2 MiB`);
    row({
      section: "7a",
      measure: `RSS holding ${int(p.largeCount)} × 2 MiB (payloads in the WAL file)`,
      result: mib(held.rss),
      notes: `after a forced GC; idle ${mib(idle.rss)}, ${int(perMessage)} B per message held ` +
        `(${(share * 100).toFixed(2)} % of the payload); ` +
        `1 s after the fill ${mib(settled.rss)}, peak ${mib(held.hwm)}; ` +
        `${(p.largeCount * 2 / 1024).toFixed(1)} GiB published in ${(fillMs / 1000).toFixed(1)} s`,
      target: "growth ≤ 1 % of the payload",
      status: verdict(share <= 0.01),
    });
  }, ["--inspect=127.0.0.1:0"]);
  const rates: Record<string, number> = {};
  for (const [where, min] of [["disk", "64KiB"], ["memory", "4MiB"]] as const) {
    await withBroker(
      o,
      200_000,
      async (b) => {
        await fill(b.url, "k", p.diskCount, 256 * KIB);
        rates[where] = await autoAckDrain(b.url, "k", p.diskCount, 16);
        log(`large: 256 KiB from ${where}: ${int(rates[where]!)} msg/s`);
      },
      [],
      ["--disk-payload-min", min],
    );
  }
  for (const where of ["disk", "memory"] as const) {
    row({
      section: "7b",
      measure: `consume limit=16 + auto_ack of 256 KiB messages from ${where}, msg/s`,
      conns: "4",
      result: int(rates[where]!),
      notes: `${int(p.diskCount)} messages, ${(rates[where]! / 4).toFixed(0)} MiB/s` +
        (where === "disk" ? `; ${(rates.disk! / rates.memory! * 100).toFixed(0)} % of memory` : ""),
    });
  }
}

const RUN: Record<Section, (o: Options, p: Plan) => Promise<void>> = {
  ceiling,
  publish: async (o, p) => {
    await publish(o, p);
    await goPublish(o, p);
  },
  consume: async (o, p) => {
    await consume(o, p);
    await clientLoop(o, p);
    await goDrain(o, p);
  },
  e2e,
  fanout,
  webhook,
  rss,
  replay,
  large,
  cluster,
  batch,
  idle,
  restart,
};

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ). */
const USER_HZ = 100;

/**
 * CPU of a started, idle broker: 4 topics with a named group each, one message held per
 * topic plus a delayed and a TTL'd one (deadlines an hour out), a webhook, and a long-poll kept
 * open (asked again whenever it ends). It settles first: after the set-up's traffic, V8's memory
 * reducer and Deno's idle I/O threads wind down over some tens of seconds (measured), which is
 * not what an idle broker costs. Target ≤ 0.1 % of a core.
 */
async function idle(o: Options, _p: Plan): Promise<void> {
  const settleS = 40; // measured: the wind-down after the set-up lasts 20-40 s
  const runS = o.quick ? 10 : 30;
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      await req.body?.cancel();
      return new Response(null, { status: 204 });
    },
  );
  const stop = new AbortController();
  try {
    await withBroker(o, 100_000, async (b) => {
      const call = async (path: string, body: string, want: number) => {
        const res = await fetch(`${b.url}${path}`, { method: "POST", body });
        const text = await res.text();
        if (res.status !== want) throw new Error(`POST ${path}: ${res.status} ${text}`);
      };
      for (let i = 0; i < 4; i++) {
        const t = `idle-${i}`;
        await call("/api/topics", JSON.stringify({ name: t }), 201);
        await call("/api/groups", JSON.stringify({ topic: t, group: "g" }), 201);
        await call(`/publish/${t}`, "held", 201);
        await call(`/publish/${t}?delay=1h`, "delayed", 201);
        await call(`/publish/${t}?ttl=1h`, "expiring", 201);
      }
      const hook = `http://127.0.0.1:${receiver.addr.port}/hook`;
      await call("/webhook/idle-0", JSON.stringify({ url: hook }), 201);
      const polling = (async () => {
        while (!stop.signal.aborted) {
          await fetch(`${b.url}/consume/idle-wait?timeout=30s`, { signal: stop.signal })
            .then((r) => r.text()).catch(() => {});
        }
      })();
      const s0 = performance.now(), settleTicks0 = await procTicks(b.pid);
      await sleep(settleS * 1000);
      await quiet();
      const t0 = performance.now(), ticks0 = await procTicks(b.pid);
      await sleep(runS * 1000);
      const ticks1 = await procTicks(b.pid), seconds = (performance.now() - t0) / 1000;
      stop.abort();
      await polling;
      const share = (ticks1 - ticks0) / USER_HZ / seconds;
      const settling = (ticks0 - settleTicks0) / USER_HZ / ((t0 - s0) / 1000);
      log(`idle: ${(share * 100).toFixed(3)} % of a core over ${seconds.toFixed(0)} s`);
      row({
        section: "11",
        measure: `idle broker (4 topics, groups, a webhook, an open long-poll), CPU over ${runS} s`,
        result: `${(share * 100).toFixed(3)} % of a core`,
        notes: [
          `${ticks1 - ticks0} ticks of 10 ms (utime+stime)`,
          `${(settling * 100).toFixed(2)} % while settling for ${settleS} s after the set-up`,
          await busyNote(),
        ].filter(Boolean).join("; "),
        target: "≤ 0.1 % of a core",
        status: verdict(share <= 0.001),
      });
    });
  } finally {
    stop.abort();
    await receiver.shutdown();
  }
}

const CHURN_TOPICS = ["churn-a", "churn-b", "churn-c", "churn-d"];

/**
 * Crash-loop traffic on CHURN_TOPICS until `count` publishes were answered, then SIGKILL with
 * requests in flight: 16 publishers of small payloads; 8 consumers taking up to 10 (a 5-minute
 * lease), acking about 45 % one by one and 45 % in a batch, leaving the rest leased. First it
 * takes what the last round left with auto_ack, as the crash loop's drains do.
 */
async function churnRound(b: Server, count: number, round: number): Promise<number> {
  for (const topic of CHURN_TOPICS) {
    while (true) {
      const res = await fetch(`${b.url}/consume/${topic}?limit=1000&auto_ack=true`);
      await res.body?.cancel();
      if (res.status !== 200) break;
    }
  }
  let published = 0;
  const done = () => published >= count;
  const post = (path: string, body: string) =>
    fetch(`${b.url}${path}`, { method: "POST", body }).then((r) => r.text());
  const publisher = async (w: number) => {
    const topic = CHURN_TOPICS[w % CHURN_TOPICS.length]!;
    for (let n = 0; !done(); n++) {
      await post(`/publish/${topic}`, `r${round}-p${w}-${n}`);
      published++;
    }
  };
  const consumer = async (c: number) => {
    for (let i = 0; !done(); i++) {
      const topic = CHURN_TOPICS[(c + i) % CHURN_TOPICS.length]!;
      const limit = 1 + (i * 7 + c) % 10;
      const res = await fetch(
        `${b.url}/consume/${topic}?limit=${limit}&timeout=100ms&visibility=5m`,
      );
      if (res.status !== 200) {
        await res.body?.cancel();
        continue;
      }
      const body = await res.json() as { id: string } | { id: string }[];
      const batch: string[] = [];
      for (const [k, m] of (Array.isArray(body) ? body : [body]).entries()) {
        const r = (k * 37 + i * 11 + c) % 100;
        if (r < 45) await post(`/ack/${topic}/${m.id}`, "");
        else if (r < 90) batch.push(m.id);
      }
      if (batch.length) await post(`/ack/${topic}`, JSON.stringify({ ids: batch }));
    }
  };
  const t0 = performance.now();
  const traffic = Promise.all([
    ...Array.from({ length: 16 }, (_, w) => publisher(w)),
    ...Array.from({ length: 8 }, (_, c) => consumer(c)),
  ]).catch(() => {}); // requests cut by the kill
  while (!done()) await sleep(POLL_MS);
  await b.stop("SIGKILL");
  await traffic;
  return published / ((performance.now() - t0) / 1000);
}

async function restart(o: Options, _p: Plan): Promise<void> {
  const rounds = o.quick ? 3 : 10, perRound = o.quick ? 4_000 : 6_000;
  const floorDir = await tempDir("ferry-bench-restart-empty-");
  const dir = await tempDir("ferry-bench-restart-");
  try {
    // The floor: spawn → listening of a broker with nothing to replay.
    const empty = await startBroker(o, floorDir, 100_000);
    await empty.stop("SIGKILL");
    const rates: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      const b = await startBroker(o, dir, 1_000_000);
      rates.push(await churnRound(b, perRound, r));
    }
    const walBytes = await dirBytes(dir);
    const zeroBytes = await zeroTailBytes(dir);
    log(
      `restart: ${rounds} rounds of ${int(perRound)} publishes (${int(Math.min(...rates))}-${
        int(Math.max(...rates))
      } msg/s), WAL ${(walBytes / MIB).toFixed(2)} MiB; restarting`,
    );
    await quiet();
    const first = await startBroker(o, dir, 1_000_000);
    const rec = first.records.find((x) => x.msg === "recovered") ?? {};
    await sleep(2_000); // what start-up does after listening (compaction) has a moment
    await first.stop("SIGKILL");
    const settledBytes = await dirBytes(dir);
    const second = await startBroker(o, dir, 1_000_000);
    await second.stop("SIGKILL");
    const floor = await startBroker(o, floorDir, 100_000);
    await floor.stop("SIGKILL");
    log(
      `restart: spawn → listening ${int(first.listenMs)} ms, again ${
        int(second.listenMs)
      } ms; empty ${int(floor.listenMs)} ms`,
    );
    row({
      section: "12",
      measure: `restart after ${rounds} SIGKILLed rounds of churn on 4 topics, spawn → listening`,
      result: `${int(first.listenMs)} ms`,
      notes: [
        `replayed ${int(Number(rec.records ?? 0))} records (${
          int(Number(rec.messages ?? 0))
        } messages) from ${(walBytes / MIB).toFixed(2)} MiB${
          zeroBytes ? ` (${(zeroBytes / MIB).toFixed(2)} MiB of it zero-filled WAL tails)` : ""
        } in ${rec.duration_ms} ms`,
        `restarted again 2 s later: ${int(second.listenMs)} ms from ${
          (settledBytes / MIB).toFixed(2)
        } MiB`,
        `empty data dir: ${int(floor.listenMs)} ms`,
        `${int(rounds * perRound)} publishes at ${int(Math.min(...rates))}-${
          int(Math.max(...rates))
        } msg/s`,
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "≤ 150 ms",
      status: verdict(first.listenMs <= 150),
    });
  } finally {
    await removeDir(dir);
    await removeDir(floorDir);
  }
}

/** Three brokers on a fresh etcd; `fn` gets the leader. Everything goes away after. */
async function withCluster<T>(o: Options, name: string, fn: (leader: Server) => Promise<T>) {
  const etcd = await startEtcd();
  const nodes: Server[] = [];
  const dirs: string[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const dir = await tempDir("ferry-bench-node-");
      dirs.push(dir);
      nodes.push(
        await startBroker(o, dir, 10_000_000, "always", [], [
          "--cluster-etcd",
          etcd.endpoint,
          "--cluster-name",
          name,
        ]),
      );
    }
    let leader: Server | undefined;
    for (let i = 0; i < 300 && !leader; i++) {
      for (const n of nodes) {
        const h = await (await fetch(`${n.url}/healthz`)).json();
        if (h.cluster_role === "leader") leader = n;
      }
      if (!leader) await sleep(POLL_MS * 5);
    }
    if (!leader) throw new Error("no leader elected within 15 s");
    // A write is answered once a synchronous follower has it: wait until one is recorded.
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${leader.url}/publish/warm-up`, { method: "POST", body: "x" });
      await res.body?.cancel();
      if (res.status === 201) break;
    }
    return await fn(leader);
  } finally {
    for (const n of nodes) await n.stop("SIGKILL");
    for (const d of dirs) await removeDir(d);
    await etcd.stop();
  }
}

async function cluster(o: Options, p: Plan): Promise<void> {
  for (const c of CONNS) {
    await withCluster(o, `bench-${c}`, async (leader) => {
      const run = { script: "publish.lua", threads: 1, conns: c, args: ["1024"] };
      await quiet();
      await wrkTimed({ ...run, url: `${leader.url}/publish/warm-${c}`, seconds: p.warmS });
      const w = await wrkTimed({
        ...run,
        url: `${leader.url}/publish/bench-${c}`,
        seconds: p.runS,
      });
      const rate = (w.requests - w.status_errors) / (w.duration_us / 1e6);
      const alone = figures.publish.get(c);
      const share = alone ? rate / alone : NaN;
      log(`cluster publish c=${c}: ${int(rate)} msg/s p99 ${ms(w.p99_us)}`);
      row({
        section: "10",
        measure: "cluster of 3: publish 1 KiB to the leader, msg/s",
        conns: String(c),
        result: int(rate),
        p50: ms(w.p50_us),
        p99: ms(w.p99_us),
        notes: [
          alone ? `${pct(share)} of standalone` : "no standalone run (--only publish,cluster)",
          errorsOf(w),
          await busyNote(),
        ].filter(Boolean).join("; "),
        target: c === 64 ? "≥ 50 % of standalone" : "",
        status: w.status_errors
          ? "FAIL"
          : c === 64 && alone
          ? verdict(share >= 0.5)
          : c === 64
          ? "n/a"
          : "",
      });
    });
  }
  await withCluster(o, "bench-e2e", async (leader) => {
    const expected = Math.round(p.e2eRate * p.e2eRunS);
    await quiet();
    const subOut = runClient(["sub", leader.url, "e2e", String(expected), String(p.e2eRunS + 40)]);
    await sleep(500); // let the consumer park its first long-poll
    const pubR = await clientResult(
      runClient([
        "pub",
        leader.url,
        "e2e",
        String(p.e2eRate),
        String(p.e2eWarmS),
        String(p.e2eRunS),
      ]),
    );
    const subR = await clientResult(subOut);
    log(`cluster e2e: p50 ${subR.p50_ms.toFixed(2)} ms p99 ${subR.p99_ms.toFixed(2)} ms`);
    row({
      section: "10",
      measure: `cluster of 3: end-to-end latency, ${int(p.e2eRate)} msg/s`,
      conns: "",
      result: `${int(subR.received)} msgs`,
      p50: `${subR.p50_ms.toFixed(2)} ms`,
      p99: `${subR.p99_ms.toFixed(2)} ms`,
      notes: [
        `publisher ${int(pubR.rate)} msg/s`,
        pubR.failed ? `${pubR.failed} publishes failed` : "",
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "",
      status: subR.received === expected && !pubR.failed ? "" : "FAIL",
    });
  });
  const kills = o.quick ? 3 : 20;
  const r = await runChaos({ kills, log });
  const sorted = [...r.failovers].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? NaN;
  row({
    section: "10",
    measure: `cluster of 3: failover after a leader SIGKILL under load, ${kills} kills`,
    conns: "",
    result: `min ${int(sorted[0] ?? NaN)} / median ${int(median)} / max ${
      int(sorted.at(-1) ?? NaN)
    } ms`,
    notes: [
      `${int(r.published)} publishes, ${int(r.acked)} acks`,
      r.violations.length ? `${r.violations.length} broken promises` : "ledger held",
      "BROKER_ELECTION_TTL=2s",
    ].join("; "),
    target: "median ≤ 3 s",
    status: r.violations.length ? "FAIL" : verdict(median <= 3_000),
  });
}

async function main(): Promise<number> {
  const o = parseArgs(Deno.args);
  const p = o.quick ? QUICK : FULL;
  // The project installs what it drives (Debian's wrk), as the test command does for its tools.
  await new Deno.Command("bash", { args: [`${ROOT}tools/setup_test_deps.sh`, "wrk", "etcd"] })
    .output();
  try {
    await new Deno.Command("wrk", { args: ["-v"], stdout: "null", stderr: "null" }).output();
  } catch {
    console.error("wrk not found and could not be installed; install it: apt-get install -y wrk");
    return 2;
  }
  await Deno.stat(o.broker).catch(() => {
    throw new Error(`broker entry ${o.broker} not found`);
  });
  const started = performance.now();
  const startedAt = new Date();
  const loadBefore = await loadAvg();
  let errors = 0;
  for (const s of SECTIONS) {
    if (!o.only.has(s)) continue;
    log(`section ${s}`);
    try {
      await RUN[s](o, p);
    } catch (e) {
      errors++;
      log(`section ${s} failed: ${(e as Error).stack ?? e}`);
      row({
        section: s,
        measure: s,
        result: "ERROR",
        notes: String((e as Error).message ?? e).split("\n")[0]!,
        status: "ERROR",
      });
    }
  }
  return await report(o, { started, startedAt, loadBefore, errors }) ? 1 : 0;
}

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(sig, () => {
    cleanup().finally(() => Deno.exit(130));
  });
}

let code = 1;
try {
  code = await main();
} catch (e) {
  console.error((e as Error).message ?? e);
} finally {
  await cleanup();
}
Deno.exit(code);
