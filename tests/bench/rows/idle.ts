/**
 * @module Section `idle` (row 11): the CPU a started broker with topics, groups, a webhook and
 * an open long-poll uses when left alone, after it has settled.
 */

import { busyNote, procTicks, quiet, USER_HZ } from "../harness/cpu.ts";
import { log } from "../harness/format.ts";
import { type Options, type Plan, sleep } from "../harness/plan.ts";
import { withBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

/**
 * CPU of a started, idle broker: 4 topics with a named group each, one message held per
 * topic plus a delayed and a TTL'd one (deadlines an hour out), a webhook, and a long-poll kept
 * open (asked again whenever it ends). It settles first: after the set-up's traffic, V8's memory
 * reducer and Deno's idle I/O threads wind down over some tens of seconds (measured), which is
 * not what an idle broker costs. Target ≤ 0.1 % of a core.
 */
export async function idle(o: Options, _p: Plan): Promise<void> {
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
