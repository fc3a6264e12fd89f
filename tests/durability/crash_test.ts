/**
 * SIGKILL mid-traffic on one data dir, the short version of the crash loop (`crash_loop.ts`):
 * three kill/restart iterations of publishing, acking and requeueing, plain and under compaction.
 * Set CRASH_SEED to repeat a run's choices. Then two targeted kills: while messages move to new
 * dead-letter queues, and during redrives onto busy topics.
 */

import { assertEquals, AssertionError } from "../_support/assert.ts";
import { crashLoop, SCENARIOS } from "./crash_loop.ts";
import type { MessageJson } from "../../protocol/wire.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, drain, json, textOf, tryPublish } from "../_support/http.ts";

const ITERATIONS = 3;

function seed(): number {
  return Number(Deno.env.get("CRASH_SEED") ?? Date.now() % 100_000);
}

Deno.test({
  name: "SIGKILL mid-traffic (fsync=always), three times: no answered write lost or duplicated",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const s = seed();
    console.log(`seed ${s}`);
    await crashLoop({ ...SCENARIOS.plain, iterations: ITERATIONS, seed: s, log: console.log });
  },
});

Deno.test({
  name: "SIGKILL mid-traffic while compaction keeps rewriting the WAL: same guarantees",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const s = seed();
    console.log(`seed ${s}`);
    const report = await crashLoop({
      ...SCENARIOS.compaction,
      iterations: ITERATIONS,
      seed: s,
      log: console.log,
    });
    console.log(`compactions: ${report.compactions}`);
  },
});

Deno.test({
  name: "SIGKILL while messages move to new dead-letter queues: each is in its topic or its DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const n = 100;
      const topics = Array.from({ length: n }, (_, i) => `mv-${i}`);
      let child = await start(dir);
      const requeue = async (m: MessageJson) => {
        const res = await fetch(`${child.url}/requeue`, {
          method: "POST",
          body: JSON.stringify(m),
          headers: { "content-type": "application/json" },
        });
        return { status: res.status, body: await json<Record<string, unknown>>(res) };
      };
      await Promise.all(topics.map(async (t) => {
        assertEquals((await tryPublish(child.url, t, `msg-${t}`)).status, 201);
        for (let i = 1; i <= 2; i++) {
          const [m] = await consumeList(child.url, t, "limit=1");
          const r = await requeue(m!);
          assertEquals(r.body.retry_count, i, JSON.stringify(r.body));
        }
      }));
      // The third requeue of each moves it to `{topic}.dlq`, a topic (and file) not yet made.
      const inFlight = await Promise.all(topics.map(async (t) => {
        const [m] = await consumeList(child.url, t, "limit=1");
        return m!;
      }));
      const killAfter = 1 + Math.floor(Math.random() * 10);
      const answered = new Set<string>();
      await Promise.all(inFlight.map(async (m) => {
        let r;
        try {
          r = await requeue(m);
        } catch {
          return; // in flight at the kill
        }
        assertEquals(r.body.status, "dead_lettered", JSON.stringify(r.body));
        answered.add(m.topic);
        if (answered.size === killAfter) child.kill("SIGKILL");
      }));
      await stop(child, "SIGKILL");

      child = await start(dir);
      const problems: string[] = [];
      for (const t of topics) {
        const src = await consumeList(child.url, t, "peek=true&limit=10");
        const dlq = await consumeList(child.url, `${t}.dlq`, "peek=true&limit=10");
        const where = `${t}: ${src.length} in the topic, ${dlq.length} in the DLQ`;
        if (src.length > 1 || dlq.length > 1) problems.push(`${where} (duplicated)`);
        if (answered.has(t)) {
          if (src.length !== 0 || dlq.length !== 1) problems.push(`${where}; move was answered`);
        } else if (src.length + dlq.length === 0) {
          problems.push(`${where}: LOST (published, never acked, move unanswered)`);
        }
        for (const m of src) if (m.retry_count !== 2) problems.push(`${t}: retry ${m.retry_count}`);
        for (const m of dlq) {
          if (m.retry_count !== 3) problems.push(`${t}.dlq: retry ${m.retry_count}`);
        }
      }
      await stop(child, "SIGKILL");
      assertEquals(
        problems,
        [],
        `${answered.size} of ${n} moves answered before the kill; ${problems.length} problems`,
      );
    }),
});

Deno.test({
  name: "SIGKILL during redrives onto busy topics: each dead letter is in its topic or its DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const topics = Array.from({ length: 40 }, (_, i) => `rd-${i}`);
    const perTopic = 5;
    const report: string[] = [];
    // Up to eight trials: the kill has to land while moves are half written.
    for (let trial = 1; trial <= 8; trial++) {
      await withDataDir(async (dir) => {
        let child = await start(dir);
        const requeue = async (m: MessageJson) => {
          const res = await fetch(`${child.url}/requeue`, {
            method: "POST",
            body: JSON.stringify(m),
            headers: { "content-type": "application/json" },
          });
          await res.body?.cancel();
          assertEquals(res.status, 200);
        };
        await Promise.all(topics.map(async (t) => {
          for (let k = 0; k < perTopic; k++) {
            assertEquals((await tryPublish(child.url, t, `dead-${t}-${k}`)).status, 201);
          }
          for (let r = 0; r < 3; r++) {
            for (const m of await consumeList(child.url, t, `limit=${perTopic}`)) await requeue(m);
          }
        }));
        // Publishers keep every target topic's WAL busy while the redrives run.
        let stopping = false;
        let warm!: () => void;
        const warmed = new Promise<void>((res) => warm = res);
        let bgAnswered = 0;
        const background = topics.map(async (t) => {
          for (let i = 0; !stopping && i < 100_000; i++) {
            try {
              await tryPublish(child.url, t, `bg-${i}`);
            } catch {
              return;
            }
            if (++bgAnswered === 200) warm();
          }
        });
        await warmed;
        const answered = new Set<string>();
        const killAfter = 1; // the first answer: the other moves are under way
        await Promise.all(topics.map(async (t) => {
          try {
            const res = await fetch(`${child.url}/api/queues/redrive?queue=${t}`, {
              method: "POST",
            });
            const body = await json<{ moved: number }>(res);
            assertEquals(body.moved, perTopic);
            answered.add(t);
            if (answered.size === killAfter) {
              stopping = true;
              child.kill("SIGKILL");
            }
          } catch (e) {
            if (e instanceof AssertionError) throw e;
          }
        }));
        stopping = true;
        await stop(child, "SIGKILL");
        await Promise.all(background);

        child = await start(dir);
        const lost: string[] = [];
        for (const t of topics) {
          const have = new Set([
            ...(await drain(child.url, t, "auto_ack=true")).map(textOf),
            ...(await consumeList(child.url, `${t}.dlq`, "peek=true&limit=1000")).map(textOf),
          ]);
          for (let k = 0; k < perTopic; k++) {
            if (!have.has(`dead-${t}-${k}`)) {
              lost.push(`dead-${t}-${k}${answered.has(t) ? " (redrive answered)" : ""}`);
            }
          }
        }
        await stop(child, "SIGKILL");
        report.push(`trial ${trial}: ${answered.size} of ${topics.length} redrives answered`);
        assertEquals(lost, [], `${report.join("; ")}: ${lost.length} dead letters lost`);
      });
    }
  },
});
