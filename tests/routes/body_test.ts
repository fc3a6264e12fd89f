/**
 * routes/body.ts through the HTTP server: JSON nested too deep, bodies that stop arriving or
 * trickle in (cut by the broker's own timer), and the header limits of the HTTP layer in front
 * of the broker.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { BODY_STALL_MS, bodyBounds, cancelStalledReads } from "../../routes/body.ts";
import { assertProblem, assertRawProblem, consume, publish, rawRequest } from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { within } from "../_support/wait.ts";

const deep = (n: number, leaf = "1") => "[".repeat(n) + leaf + "]".repeat(n);

Deno.test("JSON nested thousands deep in any field is 400, never a 500", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "d", "x");
    const cases: [string, string, string][] = [
      ["POST", "/api/topics", `{"name":"t1","max_messages":${deep(3000)}}`],
      ["POST", "/api/topics", `{"name":"t1","policy":${deep(3000)}}`],
      ["POST", "/api/queues/consume", `{"queue":"d","auto_ack":${deep(3000)}}`],
      ["POST", "/api/queues/publish", `{"queue":"d","payload":"x","broadcast":${deep(3000)}}`],
      ["POST", "/api/queues/publish", `{"queue":"d","payload":"x","priority":${deep(3000)}}`],
      ["POST", "/api/queues/publish", `{"queue":"d","payload":"x","ttl":${deep(3000)}}`],
      ["POST", "/ack/d", `{"ids":${deep(3000, '"a"')}}`],
      ["POST", "/requeue", `{"topic":"d","id":${deep(3000)}}`],
      ["POST", "/api/groups", `{"topic":"d","group":{"a":${deep(3000)}}}`],
      ["POST", "/api/topics", `{"name":"t2","max_messages":${deep(10)}}`],
    ];
    for (const [method, path, body] of cases) {
      const res = await ctx.call(method, path, {
        body,
        headers: { "content-type": "application/json" },
      });
      assertProblem(res, 400);
    }
    assertEquals((await consume(ctx, "d")).payload_text, "x");
  });
});

Deno.test("a number field given as an array or object is 400, not read as its text", async () => {
  await withBroker({}, async (ctx) => {
    for (const max of ["[5]", '{"a":5}', '"5x"', "5.5", "true"]) {
      const res = await ctx.call("POST", "/api/topics", {
        body: `{"name":"n","max_messages":${max}}`,
        headers: { "content-type": "application/json" },
      });
      assertProblem(res, 400, "invalid_parameter");
    }
    const ok = await ctx.call("POST", "/api/topics", { json: { name: "n", max_messages: 5 } });
    assertEquals(ok.status, 201, ok.text);
  });
});

Deno.test("a body that stops arriving is cancelled after BODY_STALL_MS with a 400", async () => {
  await withBroker({}, async (ctx) => {
    const half =
      "POST /publish/slow HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n0123456789";
    const res = await rawRequest(ctx.url, half, async () => {
      // The handler is reading the body once the broker has answered another request.
      await ctx.call("GET", "/healthz");
      cancelStalledReads(performance.now() + BODY_STALL_MS);
    });
    assertRawProblem(res, 400, "bad_request");
    assertMatch(JSON.parse(res.body).detail, /no bytes came/);
    const queues = await ctx.call("GET", "/api/queues");
    assertEquals(queues.body, [], "nothing was published");
  });
});

/** Runs `fn` with the body bounds shortened to `bounds`, and puts them back. */
async function withBodyBounds(
  bounds: Partial<typeof bodyBounds>,
  fn: () => Promise<void>,
): Promise<void> {
  const saved = { ...bodyBounds };
  Object.assign(bodyBounds, bounds);
  try {
    await fn();
  } finally {
    Object.assign(bodyBounds, saved);
  }
}

Deno.test("a stalled body is cut by the broker's own timer, with no other request arriving", async () => {
  await withBodyBounds({ stallMs: 300, checkMs: 50 }, async () => {
    await withBroker({}, async (ctx) => {
      const t0 = performance.now();
      const res = await within(
        rawRequest(
          ctx.url,
          "POST /publish/idle HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n0123456789",
        ),
        10_000,
        "the stalled body's answer",
      );
      const waited = performance.now() - t0;
      assertRawProblem(res, 400, "bad_request");
      assertMatch(JSON.parse(res.body).detail, /no bytes came for 0\.3s/);
      assert(waited >= 300, `cut after ${waited} ms, before the stall bound`);
      assertEquals(ctx.broker.memory.held, 0, "the cut body holds nothing");
    });
  });
});

Deno.test("a body that trickles in is cut once it has taken the total bound", async () => {
  await withBodyBounds({ stallMs: 10_000, totalMs: 400, checkMs: 50 }, async () => {
    await withBroker({}, async (ctx) => {
      const port = Number(new URL(ctx.url).port);
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      const enc = new TextEncoder();
      await conn.write(
        enc.encode("POST /publish/drip HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n"),
      );
      // A byte every 50 ms: never a stall, never the end.
      const drip = setInterval(() => conn.write(enc.encode("x")).catch(() => {}), 50);
      try {
        const buf = new Uint8Array(4096);
        const n = await within(conn.read(buf), 10_000, "the trickled body's answer");
        const text = new TextDecoder().decode(buf.subarray(0, n ?? 0));
        assertMatch(text, /^HTTP\/1\.1 400 /);
        assertMatch(text, /it took longer than 0\.4s/);
      } finally {
        clearInterval(drip);
        conn.close();
      }
      assertEquals((await ctx.call("GET", "/api/queues")).body, [], "nothing was published");
    });
  });
});

Deno.test("a body still arriving is not cancelled", async () => {
  await withBroker({}, async (ctx) => {
    const body = "a".repeat(1000);
    const res = await rawRequest(
      ctx.url,
      `POST /publish/fine HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      () => cancelStalledReads(performance.now() + BODY_STALL_MS - 1_000),
    );
    assertEquals(res.status, 201, res.body);
  });
});

Deno.test("X-MQ-* headers up to the HTTP layer's limits are stored", async () => {
  await withBroker({}, async (ctx) => {
    // The runtime takes at most 128 header lines; 120 X-MQ-* headers leave room for the rest.
    const many: Record<string, string> = {};
    for (let i = 0; i < 120; i++) many[`x-mq-h${i}`] = `v${i}`;
    await publish(ctx, "hdr", "many", "", many);
    const m = await consume(ctx, "hdr");
    assertEquals(Object.keys(m.headers).length, 120);
    // Close to 16 KiB of stored headers (names, values and Content-Type), the broker's limit.
    await publish(ctx, "hdr", "big", "", { "x-mq-big": "b".repeat(16 * 1024 - 64) });
    assertEquals((await consume(ctx, "hdr")).headers["x-mq-big"].length, 16 * 1024 - 64);
    const over = await ctx.call("POST", "/publish/hdr", {
      body: "x",
      headers: { "x-mq-big": "b".repeat(16 * 1024) },
    });
    assertProblem(over, 400, "invalid_parameter");
  });
});

Deno.test("past the HTTP layer's header limits the runtime answers 400 and the broker lives", async () => {
  await withBroker({}, async (ctx) => {
    const lines = Array.from({ length: 140 }, (_, i) => `X-MQ-h${i}: v\r\n`).join("");
    const tooMany = await rawRequest(
      ctx.url,
      `POST /publish/lim HTTP/1.1\r\nHost: localhost\r\n${lines}Content-Length: 1\r\n\r\nx`,
    );
    assertEquals(tooMany.status, 400, "more than 128 header lines");
    const huge = await rawRequest(
      ctx.url,
      `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-MQ-a: ${"a".repeat(70_000)}\r\n\r\n`,
    );
    assertEquals(huge.status, 400, "a header block over 64 KiB");
    const uri = await rawRequest(
      ctx.url,
      `GET /${"u".repeat(70_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    );
    assertEquals(uri.status, 400, "a request line over 64 KiB");
    await publish(ctx, "lim", "still here");
  });
});
