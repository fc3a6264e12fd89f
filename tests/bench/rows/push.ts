/**
 * @module Sections `fanout` (rows 8) and `webhook` (row 9), the broker pushing: one publisher
 * fanned out to 100 SSE streams and then 100 WebSocket spies (latency and broker CPU), and a
 * backlog delivered to a signed webhook whose receiver runs in the harness.
 */

import { busyNote, procTicks, quiet, USER_HZ } from "../harness/cpu.ts";
import { int, log } from "../harness/format.ts";
import { KIB, type Options, type Plan, POLL_MS, sleep } from "../harness/plan.ts";
import { fill } from "../harness/probes.ts";
import { clientResult, runClient, withBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

/** Bytes of each fan-out message: small, so the row measures the fan-out, not Base64. */
const FANOUT_BYTES = 128;

/** The SSE row, then the WebSocket row. */
export async function fanout(o: Options, p: Plan): Promise<void> {
  await fanoutRow(o, p, "sse");
  await fanoutRow(o, p, "ws");
}

async function fanoutRow(o: Options, p: Plan, kind: "sse" | "ws"): Promise<void> {
  await withBroker(
    o,
    1_000_000,
    async (b) => {
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
      const cpuShare = (await procTicks(b.pid) - cpu0) / USER_HZ /
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
    },
    [],
    // One process holds every spy socket: the WebSocket caps (docs/security.md) must admit them.
    [
      "--ws-max-sockets",
      String(p.fanoutStreams),
      "--ws-max-sockets-per-key",
      String(p.fanoutStreams),
    ],
  );
}

/** A backlog of 1 KiB messages pushed to one signed webhook, 16 in flight. */
export async function webhook(o: Options, p: Plan): Promise<void> {
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
      // The receiver is on loopback, which brokers refuse unless BROKER_WEBHOOK_ALLOW names it.
      ["--webhook-concurrency", "16", "--webhook-allow", "127.0.0.0/8,::1"],
    );
  } finally {
    await receiver.shutdown();
  }
}
