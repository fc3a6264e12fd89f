/**
 * The webhook egress policy through a real broker process: a refused target is a 400 at
 * registration, and checked again at every delivery, so a webhook registered before its target
 * was denied sends nothing and dead-letters its messages with the reason. A bad range stops
 * start-up naming the setting.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { runMain, start, stop, withDataDir } from "../_support/child.ts";
import { assertProblem, call } from "../_support/http.ts";

Deno.test("webhook egress: a denied target is refused at registration and again at delivery", async () => {
  const hits: string[] = [];
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      hits.push(await req.text());
      return new Response(null, { status: 204 });
    },
  );
  const hook = `http://127.0.0.1:${receiver.addr.port}/hook`;
  const deny = { BROKER_WEBHOOK_DENY: "127.0.0.0/8,::1" };
  try {
    await withDataDir(async (dir) => {
      const open = await start(dir);
      const added = await call(open.url, "POST", "/webhook/orders", { json: { url: hook } });
      assertEquals(added.status, 201, added.text);
      const metadata = await call(open.url, "POST", "/webhook/orders", {
        json: { url: "http://169.254.169.254/latest/meta-data/" },
      });
      assertProblem(metadata, 400, "invalid_parameter");
      assert(metadata.text.includes("metadata address"), metadata.text);
      await stop(open, "SIGTERM");

      const closed = await start(dir, deny);
      const again = await call(closed.url, "POST", "/webhook/other", { json: { url: hook } });
      assertProblem(again, 400, "invalid_parameter");
      assert(again.text.includes("BROKER_WEBHOOK_DENY (127.0.0.0/8)"), again.text);
      // Registered before the policy: each delivery is checked, refused, and dead-lettered.
      assertEquals(
        (await call(closed.url, "POST", "/publish/orders", { body: "o-1" })).status,
        201,
      );
      // A long poll on the dead-letter queue answers once the push has dead-lettered it.
      const dead = await call(closed.url, "GET", "/consume/orders.dlq?timeout=10s");
      const m = dead.body as { payload_text: string; reason: string };
      assertEquals(m.payload_text, "o-1", dead.text);
      assertEquals(
        m.reason,
        "webhook target refused: 127.0.0.1 is in BROKER_WEBHOOK_DENY (127.0.0.0/8)",
      );
      assertEquals(hits, [], "nothing reached the denied receiver");
      await stop(closed, "SIGTERM");
    });
  } finally {
    await receiver.shutdown();
  }
});

Deno.test("webhook egress: a range that does not parse stops start-up with exit 2 naming the setting", async () => {
  const out = await runMain({ dataDir: ":memory:", env: { BROKER_WEBHOOK_ALLOW: "10.0.0.0/40" } });
  assertEquals(out.code, 2, out.stderr);
  assert(
    out.stderr.includes('BROKER_WEBHOOK_ALLOW: "10.0.0.0/40" is not an address range'),
    out.stderr,
  );
});
