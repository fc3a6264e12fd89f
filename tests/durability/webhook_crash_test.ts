/**
 * Webhooks under SIGKILL: the broker is killed while it pushes to a real receiver, and after
 * the restart every message it answered 2xx for reaches the receiver (at least once) or the
 * dead-letter queue. Nothing owed is lost: the registration and each webhook's group are in the
 * WAL, and a POST in flight was only leased.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";
import { call, consumeList, tryPublish } from "../_support/http.ts";

const MESSAGES = 300;
const KILL_AFTER_RECEIVED = 60;

Deno.test({
  name: "webhooks under SIGKILL: every answered publish reaches the receiver or the DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      /** Ids of the POSTs answered 2xx: what was delivered. */
      const received = new Set<string>();
      let posts = 0;
      let onReceive = () => {};
      const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
        // Every seventh POST fails, so retries are under way when the kill comes.
        if (++posts % 7 === 0) return new Response(null, { status: 500 });
        received.add(req.headers.get("x-ferry-message-id") ?? "");
        onReceive();
        return new Response(null, { status: 200 });
      });
      const env = {
        BROKER_WEBHOOK_RETRY_SCHEDULE: "50ms,100ms,200ms",
        BROKER_WEBHOOK_ALLOW: LOOPBACK_ALLOW, // the receiver is on loopback
      };
      try {
        let child = await start(dir, env);
        const reg = await call(child, "POST", "/webhook/jobs", {
          json: { url: `http://127.0.0.1:${server.addr.port}/hook` },
        });
        assertEquals(reg.status, 201, reg.text);
        const answered: string[] = [];
        const killed = new Promise<void>((resolve) => {
          onReceive = () => {
            if (received.size === KILL_AFTER_RECEIVED) resolve();
          };
        });
        const publishing = (async () => {
          for (let i = 0; i < MESSAGES; i++) {
            const res = await tryPublish(child, "jobs", `m${i}`).catch(() => undefined);
            if (res?.status === 201) answered.push(res.body.id);
            else if (!res) break;
          }
        })();
        await killed;
        await stop(child, "SIGKILL");
        await publishing;
        assert(answered.length > KILL_AFTER_RECEIVED / 2, `${answered.length} answered`);

        child = await start(dir, env);
        const owed = () => answered.filter((id) => !received.has(id));
        for (let i = 0; i < 1_000 && owed().length; i++) {
          await new Promise((r) => setTimeout(r, 20)); // the restarted broker pushes on its own
        }
        const dead = new Set(
          (await consumeList(child.url, "jobs.dlq", "peek=true&limit=1000")).map((m) => m.id),
        );
        const lost = owed().filter((id) => !dead.has(id));
        assertEquals(
          lost,
          [],
          `${lost.length} of ${answered.length} answered publishes never arrived`,
        );
        await stop(child, "SIGKILL");
      } finally {
        await server.shutdown();
      }
    }),
});
