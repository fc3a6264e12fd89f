/**
 * The client's error surface against a real broker: the codes exported, `isTemporary`,
 * `retryAfterMs`, the distinct error of an answer it cannot read, and `requeue({ deadLetter })`.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { withLiveBroker } from "../../_support/server.ts";
import {
  CLIENT_ERROR_CODES,
  ERROR_CODES,
  Ferry,
  FerryBadResponseError,
  FerryError,
  isTemporary,
} from "../../../clients/ts/mod.ts";

Deno.test("errors: the codes are exported, isTemporary tells waiting from mending, retryAfterMs", async () => {
  assert(ERROR_CODES.includes("queue_full") && ERROR_CODES.includes("invalid_name"));
  assert(CLIENT_ERROR_CODES.includes("closed") && CLIENT_ERROR_CODES.includes("redirect_refused"));
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url, retries: 0 });
    await ferry.createTopic("full", { maxMessages: 1 });
    await ferry.publish("full", "a");
    const full = await ferry.publish("full", "b").catch((e) => e);
    assert(full instanceof FerryError, String(full));
    assertEquals([full.status, full.code, isTemporary(full)], [429, "queue_full", true]);
    assertEquals(full.retryAfterMs, full.retryAfter! * 1000);
    assert(full.retryAfterMs! > 0);

    const bad = await ferry.publish("no spaces", "x").catch((e) => e);
    assertEquals([bad.code, isTemporary(bad)], ["invalid_name", false]);
    const nobody = new Ferry({ url: "http://127.0.0.1:81", retries: 0 });
    assert(isTemporary(await nobody.topics().catch((e) => e)), "a lost connection is temporary");
    assertEquals(isTemporary(new Error("other")), false);
  });
});

Deno.test("errors: a 2xx the client cannot read is a FerryBadResponseError", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response("<html>a proxy's page</html>", { status: 200 }),
  );
  try {
    const ferry = new Ferry({ url: `http://127.0.0.1:${server.addr.port}`, retries: 0 });
    const e = await ferry.topics().catch((e) => e);
    assert(e instanceof FerryBadResponseError && e instanceof FerryError, String(e));
    assertEquals([e.status, e.code, e.name], [200, "bad_response", "FerryBadResponseError"]);
    assert(e.cause instanceof SyntaxError, "it holds the parse error");
  } finally {
    await server.shutdown();
  }
});

Deno.test("requeue({ deadLetter: true }) moves a message to {topic}.dlq at once", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    await ferry.publish("poison", "cannot parse");
    const [m] = await ferry.consume("poison");
    const r = await ferry.requeue(m!, { reason: "bad input", deadLetter: true });
    assertEquals(r.status, "dead_lettered");
    const [dead] = await ferry.consume("poison.dlq");
    assertEquals([dead!.payload_text, dead!.reason], ["cannot parse", "bad input"]);
  });
});
