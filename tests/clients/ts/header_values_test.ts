/**
 * A header the platform cannot send (an API key or header value with a character outside
 * ISO-8859-1, or a line break) is the caller's mistake: a FerryUsageError (a TypeError) naming the
 * option, before anything is sent, never a FerryConnectionError and never retried. `ferry` turns
 * it into a usage error (exit 2) on one line.
 */

import { counting } from "../../_support/http.ts";
import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { ferry } from "../../_support/cli.ts";
import { withBroker } from "../../_support/server.ts";
import {
  Ferry,
  FerryConnectionError,
  FerryError,
  FerryUsageError,
} from "../../../clients/ts/mod.ts";

Deno.test("new Ferry() refuses an apiKey no header can carry, naming the option", () => {
  for (const apiKey of ["…", "s3cret…", "s3cret\nline", "s3c\r\nret", "s3cret\0"]) {
    let e: unknown;
    try {
      new Ferry({ url: "http://127.0.0.1:1", apiKey });
    } catch (err) {
      e = err;
    }
    assert(e instanceof FerryUsageError, `${JSON.stringify(apiKey)}: ${e}`);
    assert(e instanceof TypeError && !(e instanceof FerryError), String(e));
    assertMatch(e.message, /^Invalid apiKey: /);
    assert(!e.message.includes("s3c"), `the key itself is not shown: ${e.message}`);
  }
  // Latin-1 is what a header carries, so these keys are fine.
  new Ferry({ apiKey: "café-ÿ" });
});

Deno.test("a publish header or idempotency key no header can carry fails the call, unsent", async () => {
  await withBroker({}, async (ctx) => {
    const c = counting();
    const client = new Ferry({ url: ctx.url, fetch: c.fetch });
    const trace = await client.publish("orders", "x", { headers: { trace: "t…1" } }).catch((e) =>
      e
    );
    const key = await client.publish("orders", "x", { idempotencyKey: "order\n42" }).catch((e) =>
      e
    );
    const type = await client.publish("orders", "x", { contentType: "text/plain; charset=“utf-8”" })
      .catch((e) => e);
    for (const e of [trace, key, type]) {
      assert(e instanceof FerryUsageError && !(e instanceof FerryConnectionError), String(e));
    }
    assertMatch(trace.message, /^Invalid header "X-MQ-trace": /);
    assertMatch(key.message, /^Invalid header "idempotency-key": /);
    assertMatch(type.message, /^Invalid header "content-type": /);
    assertEquals(c.n, 0, "nothing was sent, so nothing was retried");
    await client.publish("orders", "x", { headers: { trace: "t-1" }, idempotencyKey: "k-1" });
    assertEquals(c.n, 1);
  });
});

Deno.test("ferry exits 2 with one line for an API key or header no header can carry", async () => {
  await withBroker({}, async (ctx) => {
    const flag = await ferry(["--api-key", "…", "topics"], { url: ctx.url });
    assertEquals([flag.code, flag.stdout], [2, ""], flag.stderr);
    assertMatch(flag.stderr, /^ferry: Invalid --api-key: [^\n]+\n$/);
    const env = await ferry(["topics"], { url: ctx.url, env: { FERRY_API_KEY: "a\u2028b" } });
    assertEquals(env.code, 2, env.stderr);
    assertMatch(env.stderr, /^ferry: Invalid FERRY_API_KEY: [^\n]+\n$/);
    const header = await ferry(["publish", "orders", "x", "--header", "X-MQ-Trace: t…1"], {
      url: ctx.url,
    });
    assertEquals(header.code, 2, header.stderr);
    assertMatch(header.stderr, /^ferry: Invalid header "X-MQ-Trace": [^\n]+\n$/);
    const [q] = await new Ferry({ url: ctx.url }).queues();
    assertEquals(q, undefined, "nothing was published");
  });
});

Deno.test("stream() with a lastEventId no header can carry ends with the usage error, unsent", async () => {
  await withBroker({}, async (ctx) => {
    const c = counting();
    const client = new Ferry({ url: ctx.url, fetch: c.fetch });
    let e: unknown;
    try {
      for await (const _ of client.stream("orders", { lastEventId: "4\n2" })) break;
    } catch (err) {
      e = err;
    }
    assert(e instanceof FerryUsageError, String(e));
    assertMatch(e.message, /^Invalid header "last-event-id": /);
    assertEquals(c.n, 0, "nothing was sent, so nothing was retried");
  });
});
