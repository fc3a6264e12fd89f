/**
 * The disk alarm on a real, small file system (a 6 MiB tmpfs, which tests may mount as root):
 * a broker started as a process fills it, publishes are refused with 507 disk_full while
 * consumers drain and ack (auto-ack too), publishing resumes by itself once space is freed, and
 * after a restart nothing acknowledged came back and nothing refused exists. With one worker and
 * with two (docs/operating.md, "Disk").
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { call, consumeList } from "../_support/http.ts";
import { type ChildBroker, logLines, start, stop } from "../_support/child.ts";
import { mountTmpfs, TMPFS_MOUNTS, unmountTmpfs } from "../_support/tmpfs.ts";
import { shardOf } from "../../lib/shard.ts";
import { DISK_CHECK_MS, freeBytesOf } from "../../lib/storage/disk_alarm.ts";

const MIB = 1024 * 1024;
const LIMIT = 2 * MIB;
const PAYLOAD_BYTES = 16 * 1024;

const MOUNT_REASON = "mount -t tmpfs is not permitted here (needs root and CAP_SYS_ADMIN)";

/** A topic name that the worker `index` of `count` owns. */
function topicOf(index: number, count: number): string {
  for (let i = 0;; i++) if (shardOf(`disk-${i}`, count) === index) return `disk-${i}`;
}

function payload(text: string): Uint8Array<ArrayBuffer> {
  const p = new Uint8Array(PAYLOAD_BYTES).fill(0x2e);
  p.set(new TextEncoder().encode(text));
  return p;
}

const label = (m: { payload: string }) => atob(m.payload).replace(/\.+$/, "");

for (const workers of [1, 2]) {
  Deno.test({
    name: `BROKER_WORKERS=${workers}: below BROKER_DISK_FREE_LIMIT publishes get 507 disk_full, ` +
      "consumers drain and ack, publishing resumes once space is back, and a restart shows " +
      "nothing acked nor refused",
    ignore: !TMPFS_MOUNTS,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const mnt = await mountTmpfs("6m");
      if (!mnt) throw new Error(MOUNT_REASON);
      let broker: ChildBroker | undefined;
      try {
        const dataDir = `${mnt}/data`;
        await Deno.mkdir(dataDir);
        // Leave the broker 1.5 MiB above its limit.
        const filler = `${mnt}/filler`;
        await Deno.writeFile(filler, new Uint8Array(await freeBytesOf(mnt) - LIMIT - 1.5 * MIB));
        const env = { BROKER_DISK_FREE_LIMIT: String(LIMIT), BROKER_WORKERS: String(workers) };
        broker = await start(dataDir, env);
        const topics = Array.from({ length: workers }, (_, i) => topicOf(i, workers));

        // Fill: publish round the topics until each refuses and the free space read from the
        // file system (not only the payloads counted since the last read) is below the limit.
        const accepted = new Map(topics.map((t) => [t, 0]));
        const last = new Map<string, number>();
        for (let i = 0;; i++) {
          assert(i < 4_000, "no lasting disk_full after 4,000 publishes");
          const t = topics[i % topics.length]!;
          const res = await call(broker.url, "POST", `/publish/${t}`, {
            body: payload(`kept-${i}`),
          });
          last.set(t, res.status);
          if (res.status === 201) accepted.set(t, accepted.get(t)! + 1);
          else {
            assertEquals(res.status, 507, res.text);
            assertEquals(res.body.code, "disk_full", res.text);
            assertEquals(res.body.title, "Insufficient Storage");
            assert(res.headers.get("retry-after"), "Retry-After missing");
            assertMatch(
              res.body.detail,
              new RegExp(`^Cannot publish to "${t}": .*BROKER_DISK_FREE_LIMIT`),
            );
          }
          if (topics.some((t) => last.get(t) !== 507)) continue;
          const stats = await call(broker.url, "GET", "/api/stats");
          if (stats.body.disk.free_bytes < LIMIT) break;
          await new Promise((r) => setTimeout(r, 100)); // the next read of the free space
        }
        for (const t of topics) assert(accepted.get(t)! > 0, `${t} took no message`);
        // Each worker reads the free space itself: one interval on, every one has read it.
        await new Promise((r) => setTimeout(r, DISK_CHECK_MS * 1.5));
        for (const t of topics) {
          const res = await call(broker.url, "POST", `/publish/${t}`, { body: "refused" });
          assertEquals([res.status, res.body.code], [507, "disk_full"], res.text);
        }
        // Every publish route refuses, before it stores anything.
        for (const t of topics) {
          const batch = await call(broker.url, "POST", `/publish/${t}/batch`, {
            json: [{ payload_text: "refused-batch" }],
          });
          assertEquals([batch.status, batch.body.code], [507, "disk_full"], batch.text);
          const dash = await call(broker.url, "POST", "/api/queues/publish", {
            json: { queue: t, payload: "refused-dashboard" },
          });
          assertEquals([dash.status, dash.body.code], [507, "disk_full"], dash.text);
        }

        // It says so, and the node stays in service for its consumers.
        const health = await call(broker.url, "GET", "/healthz");
        assertEquals([health.status, health.body.status, health.body.disk_alarm], [
          200,
          "ok",
          true,
        ]);
        const stats = await call(broker.url, "GET", "/api/stats");
        assertEquals(stats.body.disk.alarm, true, stats.text);
        assertEquals(stats.body.disk.limit_bytes, LIMIT);
        assert(stats.body.disk.free_bytes < LIMIT, stats.text);
        const metrics = await call(broker.url, "GET", "/metrics");
        assertMatch(metrics.text, /^ferry_disk_alarm 1$/m);
        assertMatch(metrics.text, /^ferry_disk_free_bytes \d+$/m);

        // Consumers drain while the alarm holds: auto-ack, and consume then ack.
        assertEquals((await consumeList(broker.url, topics[0]!, "auto_ack=true")).length, 1);
        const still = await call(broker.url, "POST", `/publish/${topics[0]}`, {
          body: "refused-while-draining",
        });
        assertEquals(still.status, 507, still.text);
        let drained = 1;
        for (const t of topics) {
          for (let round = 0;; round++) {
            assert(round < 1_000, "drain did not end");
            const auto = await consumeList(broker.url, t, "limit=5&auto_ack=true");
            const taken = await consumeList(broker.url, t, "limit=5");
            for (const m of taken) {
              const ack = await call(broker.url, "POST", `/ack/${t}/${m.id}`);
              assertEquals(ack.status, 204, ack.text);
            }
            drained += auto.length + taken.length;
            if (auto.length + taken.length === 0) break;
          }
        }
        assertEquals(drained, [...accepted.values()].reduce((a, b) => a + b));
        // Space comes back: publishing resumes by itself, without a restart.
        await Deno.remove(filler);
        const after: string[] = [];
        for (const t of topics) {
          for (let i = 0;; i++) {
            assert(i < 150, `${t}: publishes still refused 15 s after space came back`);
            const res = await call(broker.url, "POST", `/publish/${t}`, {
              body: payload(`after-${t}`),
            });
            if (res.status === 201) break;
            assertEquals(res.status, 507, res.text);
            await new Promise((r) => setTimeout(r, 100));
          }
          after.push(`after-${t}`);
        }
        const msgs = logLines(broker).map((l) => l.msg);
        assert(msgs.includes("disk alarm: free space below the limit; publishes refused"), "");
        assert(msgs.includes("disk alarm cleared; publishes accepted again"), "");
        assertEquals((await call(broker.url, "GET", "/healthz")).body.disk_alarm, undefined);

        // After a restart: only what was published after the alarm ended.
        assertEquals((await stop(broker, "SIGTERM")).code, 0);
        broker = await start(dataDir, env);
        const found: string[] = [];
        for (const t of topics) {
          for (const m of await consumeList(broker.url, t, "limit=1000&auto_ack=true")) {
            found.push(label(m));
          }
        }
        assertEquals(found.sort(), after.sort());
      } finally {
        if (broker) await stop(broker, "SIGTERM");
        await unmountTmpfs(mnt);
      }
    },
  });
}
