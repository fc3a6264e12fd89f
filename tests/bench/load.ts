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
 * large, cluster, batch, idle, restart, workers, security.
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
 *   workers  the same build at BROKER_WORKERS=1 and 2: publish 1 KiB over 16 topics at 64
 *            connections, and a drain of one topic (consume limit=100 + batch ack), with the
 *            broker's CPU per message. Target: 2 workers ≥ 1.5 × one (docs/architecture.md).
 *   security publish 1 KiB at 64 connections over plain HTTP and over HTTPS (a throwaway CA's
 *            certificate), same run, with CPU per publish; and one key's publish p99 alone and
 *            while another key is hammered past its rate by 64 loops of the TypeScript client.
 *            Target: that p99 ≤ 2 × alone.
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
 *
 * Layout: this file parses the arguments and runs the sections in order. tests/bench/harness/
 * holds the machinery (plan.ts: sections, options and sizes; spawn.ts: brokers and helper
 * servers as the start task starts them; wrk.ts; probes.ts: stats, fills, fsync histograms;
 * cpu.ts and memory.ts: /proc readings, the quiet-machine guard, the inspector's GC; go.ts;
 * machine.ts; cleanup.ts; format.ts). tests/bench/rows/ has one module per section or group of
 * sections, each adding rows; tests/bench/report.ts keeps the rows and prints and writes the
 * table.
 */

import { workers } from "./rows/workers.ts";
import { security } from "./rows/security.ts";
import { cleanup } from "./harness/cleanup.ts";
import { log } from "./harness/format.ts";
import { loadAvg } from "./harness/machine.ts";
import {
  FULL,
  join,
  type Options,
  type Plan,
  QUICK,
  ROOT,
  type Section,
  SECTIONS,
} from "./harness/plan.ts";
import { report, row } from "./report.ts";
import { ceiling } from "./rows/ceiling.ts";
import { clientLoop, consume, goDrain } from "./rows/consume.ts";
import { cluster } from "./rows/cluster.ts";
import { e2e } from "./rows/e2e.ts";
import { idle } from "./rows/idle.ts";
import { large, rss } from "./rows/memory.ts";
import { batch, goPublish, publish } from "./rows/publish.ts";
import { fanout, webhook } from "./rows/push.ts";
import { replay } from "./rows/replay.ts";
import { restart } from "./rows/restart.ts";

/** The command line (see the usage above); throws on anything it does not know. */
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

/** What each section name runs. */
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
  workers,
  security,
};

/** Runs the chosen sections, then reports; resolves with the exit code. */
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
