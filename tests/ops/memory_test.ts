/**
 * Memory after a load: a broker started as `deno task start` starts it (its malloc settings)
 * gives back what a load of large payloads took once the payloads are gone, instead of staying
 * at its high-water mark.
 */

import assert from "node:assert/strict";
import { startTask } from "../_support/start_task.ts";
import { start, stop, withDataDir } from "../durability/_util.ts";

const MIB = 1024 * 1024;

async function rssBytes(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) * 1024;
}

Deno.test({
  name: "after 200 MiB of 2 MiB payloads are purged, RSS comes back near where it started",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const task = startTask();
      const v8 = task.v8Flags.map((f) => f.slice("--v8-flags=".length)).join(",");
      const child = await start(dir, { ...task.env, DENO_V8_FLAGS: v8, BROKER_FSYNC: "never" });
      const pid = child.process.pid;
      const idle = await rssBytes(pid);
      const payload = new Uint8Array(2 * MIB).fill(0x61);
      await Promise.all(["m1", "m2"].map(async (t) => {
        for (let i = 0; i < 50; i++) {
          const res = await fetch(`${child.url}/publish/${t}`, { method: "POST", body: payload });
          assert.equal(res.status, 201, await res.text());
        }
      }));
      const loaded = await rssBytes(pid);
      assert.ok(loaded > idle + 150 * MIB, `the load took ${(loaded - idle) / MIB} MiB`);
      for (const t of ["m1", "m2"]) {
        const res = await fetch(`${child.url}/api/queues/purge?queue=${t}`, { method: "DELETE" });
        assert.equal(res.status, 200, await res.text());
      }
      // Freed payloads go back once V8 collects them; poll, bounded, rather than guess a time.
      const bound = idle + 64 * MIB;
      let now = loaded;
      for (let i = 0; i < 120 && now > bound; i++) {
        await new Promise((r) => setTimeout(r, 250));
        now = await rssBytes(pid);
      }
      const mib = (b: number) => (b / MIB).toFixed(0);
      assert.ok(
        now <= bound,
        `RSS idle ${mib(idle)} MiB, loaded ${mib(loaded)}, 30 s after the purge ${mib(now)}`,
      );
      await stop(child, "SIGTERM");
    }),
});
