/**
 * The durable feed under SIGKILL: a server-sent-events reader watches a topic while publishers
 * write to it, and the broker is killed mid-stream. Every message the reader heard must be in
 * the log after the restart: an event goes out only once its record is written and fsynced, so
 * nothing a reader holds can be erased by a crash.
 */

import { assert } from "../_support/assert.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, tryPublish } from "../_support/http.ts";
import { openSse } from "../_support/sse.ts";

const PUBLISHERS = 16;
/** Events heard before the kill: enough that the kill lands while writes are in flight. */
const HEARD_BEFORE_KILL = 300;

Deno.test({
  name: "SSE under SIGKILL: every message a reader heard is in the log after the restart",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const child = await start(dir);
      const reader = await openSse(`${child.url}/stream/watched`);
      let publishing = true;
      const publishers = Array.from({ length: PUBLISHERS }, async (_, p) => {
        for (let i = 0; publishing; i++) {
          await tryPublish(child, "watched", `p${p}-${i}`).catch(() => (publishing = false));
        }
      });
      const heard = new Set<string>();
      let killed: Promise<unknown> | undefined;
      for (let e = await reader.next(); e; e = await reader.next()) {
        if (e.data === undefined) continue;
        heard.add(JSON.parse(e.data).id);
        if (heard.size === HEARD_BEFORE_KILL) killed = stop(child, "SIGKILL");
      }
      await killed;
      publishing = false;
      await Promise.all(publishers);
      await reader.close();
      assert(heard.size >= HEARD_BEFORE_KILL, `heard ${heard.size}`);

      const again = await start(dir);
      const held = new Set(
        (await consumeList(again.url, "watched", "peek=true&limit=1000")).map((m) => m.id),
      );
      let more = held.size === 1000;
      // Peeks show at most 1,000: take the rest page by page until every heard id is checked.
      while (more) {
        const page = await consumeList(again.url, "watched", "limit=1000&auto_ack=true");
        for (const m of page) held.add(m.id);
        more = page.length === 1000;
      }
      const lost = [...heard].filter((id) => !held.has(id));
      assert(lost.length === 0, `${lost.length} of ${heard.size} heard messages were lost`);
      await stop(again, "SIGKILL");
    }),
});
