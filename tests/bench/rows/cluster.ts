/**
 * @module Section `cluster` (rows 10): a three-node cluster on a real etcd: publish to the
 * leader at 1/16/64 connections beside the standalone rows, end-to-end latency, and failover
 * times over leader SIGKILLs under load (tests/cluster/chaos.ts).
 */

import { startEtcd } from "../../_support/etcd.ts";
import { runChaos } from "../../cluster/chaos.ts";
import { removeDir, tempDir } from "../harness/cleanup.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log, ms, pct } from "../harness/format.ts";
import { CONNS, type Options, type Plan, POLL_MS, sleep } from "../harness/plan.ts";
import { clientResult, runClient, type Server, startBroker } from "../harness/spawn.ts";
import { errorsOf, wrkTimed } from "../harness/wrk.ts";
import { figures, row, verdict } from "../report.ts";

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

/** Cluster publish and e2e rows, then failover over leader kills. */
export async function cluster(o: Options, p: Plan): Promise<void> {
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
