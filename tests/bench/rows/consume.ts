/**
 * @module Section `consume` (rows 3): the drain's ceiling and the cost of building answers, then
 * draining a filled topic with consume + ack at limit=1 and limit=100 (wrk), through the client
 * library's messages() loop (tests/bench/client_drain.ts) and through the Go client's `Process`.
 */

import { Broker, type Handed } from "../../../lib/broker.ts";
import { defaultConfig } from "../../../lib/config.ts";
import { messagesText } from "../../../routes/wire.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log, ms, pct } from "../harness/format.ts";
import { goBench, runGo } from "../harness/go.ts";
import { HERE, join, KIB, type Options, type Plan } from "../harness/plan.ts";
import { fill, fsyncHistogram, fsyncNote, type TopicStats, topicStats } from "../harness/probes.ts";
import { clientResult, runClient, spawnServer, withBroker } from "../harness/spawn.ts";
import { errorsOf, wrkTimed, wrkUntil } from "../harness/wrk.ts";
import { figures, row, type Status, verdict } from "../report.ts";

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

/** The drain ceiling, the answer cost, then the limit=1 and limit=100 drains. */
export async function consume(o: Options, p: Plan): Promise<void> {
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
export async function clientLoop(o: Options, p: Plan): Promise<void> {
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

/** The Go client's Process (Prefetch 100, batch acks) draining what 3b drained with raw HTTP. */
export async function goDrain(o: Options, p: Plan): Promise<void> {
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
