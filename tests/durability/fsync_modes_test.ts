/**
 * BROKER_FSYNC=interval and =never serve and keep their data across a graceful restart;
 * a bad BROKER_FSYNC value stops start-up with one clear line and no stack trace.
 */

import {
  assert,
  assertEquals,
  assertMatch,
  assertNotEquals,
  assertNotMatch,
} from "../_support/assert.ts";
import { logLines, runMain, start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, drain, textOf, tryPublish } from "../_support/http.ts";

for (const mode of ["interval", "never"] as const) {
  for (const how of ["env", "flag"] as const) {
    Deno.test({
      name: `BROKER_FSYNC=${mode} (${how}) serves and survives a SIGTERM restart`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () =>
        withDataDir(async (dir) => {
          const env: Record<string, string> = how === "env" ? { BROKER_FSYNC: mode } : {};
          const args = how === "flag" ? ["--fsync", mode] : [];
          const topic = `fsync-${mode}`;
          const sent: string[] = [];
          let child = await start(dir, env, args);
          const listening = logLines(child).find((l) => l.msg === "listening");
          assertEquals(
            listening?.fsync,
            mode,
            "the listening line reports the fsync mode",
          );

          // One at a time, so publish order is known.
          for (let i = 0; i < 200; i++) {
            const p = await tryPublish(child.url, topic, `${mode}-${i}`);
            assertEquals(p.status, 201, JSON.stringify(p.body));
            sent.push(`${mode}-${i}`);
          }
          // Take 50 and ack them; take 10 more and leave them in flight.
          const acked = await consumeList(child.url, topic, "limit=50&auto_ack=true");
          assertEquals(acked.length, 50);
          const held = await consumeList(child.url, topic, "limit=10");
          assertEquals(held.length, 10);

          const status = await stop(child, "SIGTERM");
          assertEquals(status.code, 0, `exit after SIGTERM:\n${child.logs.join("\n")}`);

          child = await start(dir, env, args);
          const back = (await drain(child.url, topic, "auto_ack=true")).map(textOf);
          assertEquals(
            back,
            sent.slice(50),
            "the 150 unacked messages, the 10 in flight first, in publish order",
          );
          assert(
            logLines(child).some((l) => l.msg === "recovered"),
            `no "recovered" line:\n${child.logs.join("\n")}`,
          );
          assertEquals((await stop(child, "SIGTERM")).code, 0);
        }),
    });
  }
}

for (const mode of ["always", "interval", "never"] as const) {
  Deno.test({
    name: `BROKER_FSYNC=${mode}: a publish answered 201 survives SIGKILL (a process crash)`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () =>
      withDataDir(async (dir) => {
        // A 2xx waits at least for the write(): the page cache outlives the process, so only
        // an OS crash or power cut may lose the tail in interval and never modes.
        const env = { BROKER_FSYNC: mode };
        let child = await start(dir, env);
        const sent = Array.from({ length: 300 }, (_, i) => `k-${mode}-${i}`);
        for (const p of sent) {
          assertEquals((await tryPublish(child.url, "killed", p)).status, 201);
        }
        await stop(child, "SIGKILL");
        child = await start(dir, env);
        assertEquals((await drain(child.url, "killed", "auto_ack=true")).map(textOf), sent);
        await stop(child, "SIGKILL");
      }),
  });
}

Deno.test({
  name:
    "an invalid BROKER_FSYNC or --fsync stops start-up with one line naming it, and no stack trace",
  fn: () =>
    withDataDir(async (dir) => {
      for (const how of ["env", "flag"] as const) {
        const out = await runMain({
          dataDir: dir,
          args: ["--port", "0", ...(how === "flag" ? ["--fsync", "sometimes"] : [])],
          env: how === "env" ? { BROKER_FSYNC: "sometimes" } : {},
        });
        const stderr = out.stderr;
        const lines = stderr.split("\n").filter((l) => l.trim() !== "");
        assertNotEquals(out.code, 0, `${how}: exit code`);
        assertEquals(lines.length, 1, `${how}: expected one stderr line, got:\n${stderr}`);
        // The flag when the value came from the command line, else the variable.
        const named = how === "flag" ? /--fsync/ : /BROKER_FSYNC/;
        assertMatch(lines[0]!, named, `${how}: the line names the setting as it was given`);
        assertMatch(lines[0]!, /sometimes/, `${how}: the line quotes the value`);
        assertNotMatch(stderr, /^\s+at /m, `${how}: no stack trace`);
        assertNotMatch(stderr, /listening/, `${how}: must not start`);
      }
    }),
});
