/**
 * BROKER_MAX_MEMORY through the HTTP server: 429 memory_full with Retry-After at the budget
 * (before the body is read when its length is known), room again as consumers drain, and the
 * held bytes in /api/queues, /api/stats and /metrics; a topic's max_bytes; large payloads that
 * stay on disk and hold only their overhead.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { MESSAGE_OVERHEAD_BYTES } from "../../lib/memory/budget.ts";
import { assertProblem, assertRawProblem, consume, publish, rawRequest } from "../_support/http.ts";
import { type TestBroker, withBroker } from "../_support/server.ts";
import { eventually } from "../_support/wait.ts";

const MIB = 1024 * 1024;
const big = () => new Uint8Array(2 * MIB).fill(0x62);
/** Keeps every payload in memory, so the budget's arithmetic is the payloads'. */
const IN_MEMORY = { diskPayloadMinBytes: 4 * MIB, payloadCacheBytes: 1024 * MIB };

Deno.test("at BROKER_MAX_MEMORY a publish is 429 memory_full until consumers make room", async () => {
  await withBroker({ ...IN_MEMORY, maxMemoryBytes: 8 * MIB }, async (ctx) => {
    for (let i = 0; i < 3; i++) await publish(ctx, "mem", big());
    const full = await ctx.call("POST", "/publish/mem", { body: big() });
    assertProblem(full, 429, "memory_full");
    assert(Number(full.headers.get("retry-after")) >= 1, "Retry-After");
    // A small message still fits, and another topic shares the same budget.
    await publish(ctx, "other", "small");
    assertProblem(await ctx.call("POST", "/publish/other", { body: big() }), 429, "memory_full");
    const m = await consume(ctx, "mem");
    assertEquals((await ctx.call("POST", `/ack/mem/${m.id}`)).status, 204);
    await publish(ctx, "mem", big());
    const q = (await ctx.call("GET", "/api/queues")).body;
    const held = Object.fromEntries(q.map((t: { name: string; held_bytes: number }) => [
      t.name,
      t.held_bytes,
    ]));
    assertEquals(held, {
      mem: 3 * (2 * MIB + MESSAGE_OVERHEAD_BYTES),
      other: 5 + MESSAGE_OVERHEAD_BYTES,
    });
    const stats = (await ctx.call("GET", "/api/stats")).body;
    assertEquals(stats.memory.budget_bytes, 8 * MIB);
    assertEquals(stats.memory.held_bytes, held.mem + held.other);
    assertEquals(stats.topics.mem.held_bytes, held.mem);
    const metrics = (await ctx.call("GET", "/metrics")).text;
    assertMatch(metrics, /ferry_memory_budget_bytes 8388608/);
    assertMatch(metrics, new RegExp(`ferry_memory_held_bytes\\{topic="mem"\\} ${held.mem}`));
    assertMatch(metrics, /ferry_messages_rejected_total\{topic="mem",reason="memory_full"\} 1/);
    assertMatch(metrics, /ferry_messages_rejected_total\{topic="other",reason="memory_full"\} 1/);
  });
});

Deno.test("a full broker refuses a publish from its Content-Length, before reading the body", async () => {
  await withBroker({ ...IN_MEMORY, maxMemoryBytes: 4 * MIB }, async (ctx) => {
    await publish(ctx, "early", big());
    // Headers promise 2 MiB, and no byte of the body is sent: the answer comes anyway.
    const res = await rawRequest(
      ctx.url,
      `POST /publish/early HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${2 * MIB}\r\n\r\n`,
    );
    assertEquals(res.status, 429, res.body);
    assertEquals(JSON.parse(res.body).code, "memory_full");
  });
});

Deno.test("purge and delete give their topic's bytes back to the budget", async () => {
  await withBroker({ ...IN_MEMORY, maxMemoryBytes: 6 * MIB }, async (ctx) => {
    await publish(ctx, "p", big());
    await publish(ctx, "d", big());
    assertProblem(await ctx.call("POST", "/publish/p", { body: big() }), 429, "memory_full");
    assertEquals((await ctx.call("DELETE", "/api/queues/purge?queue=p")).status, 200);
    await publish(ctx, "p", big());
    assertEquals((await ctx.call("DELETE", "/api/queues/delete?queue=d")).status, 200);
    await publish(ctx, "p", big());
    assertEquals(ctx.broker.memory.held, 2 * (2 * MIB + MESSAGE_OVERHEAD_BYTES));
  });
});

Deno.test("a topic's max_bytes caps it: reject refuses, drop-oldest drops the oldest", async () => {
  await withBroker({}, async (ctx) => {
    const cap = 5 * MIB;
    for (const [name, policy] of [["capped", "reject"], ["rolling", "drop-oldest"]]) {
      const res = await ctx.call("POST", "/api/topics", {
        json: { name, policy, max_bytes: cap },
      });
      assertEquals(res.status, 201, res.text);
      assertEquals(res.body.max_bytes, cap);
    }
    for (let i = 0; i < 2; i++) {
      await publish(ctx, "capped", big());
      await publish(ctx, "rolling", big());
    }
    const full = await ctx.call("POST", "/publish/capped", { body: big() });
    assertProblem(full, 429, "queue_full");
    assertMatch(full.body.detail, /max_bytes/);
    const first = await consume(ctx, "rolling", "peek=true");
    await publish(ctx, "rolling", big());
    const kept = await consume(ctx, "rolling", "peek=true&limit=10");
    assertEquals(kept.length, 2, "the oldest was dropped to make room");
    assert(!kept.some((m: { id: string }) => m.id === first.id));
    // One message larger than max_bytes fits under no policy.
    const small = await ctx.call("POST", "/api/topics", {
      json: { name: "tiny", policy: "drop-oldest", max_bytes: MIB },
    });
    assertEquals(small.status, 201, small.text);
    assertProblem(await ctx.call("POST", "/publish/tiny", { body: big() }), 429, "queue_full");
    for (const bad of [0, -1, "lots", 1.5]) {
      const res = await ctx.call("POST", "/api/topics", { json: { name: "bad", max_bytes: bad } });
      assertProblem(res, 400, "invalid_parameter");
    }
  });
});

Deno.test("a redrive moves only what fits the target's max_bytes; the rest stays dead-lettered", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/topics", { json: { name: "rb", max_bytes: 5 * MIB } });
    assertEquals(res.status, 201, res.text);
    for (let i = 0; i < 3; i++) await publish(ctx, "rb.dlq", big());
    const moved = await ctx.call("POST", "/api/queues/redrive?queue=rb");
    assertEquals(moved.body.moved, 2, moved.text);
    const left = await consume(ctx, "rb.dlq", "peek=true&limit=10");
    assertEquals(left.length, 1);
  });
});

Deno.test("payloads of BROKER_DISK_PAYLOAD_MIN or more hold only their overhead once durable", async () => {
  await withBroker({ maxMemoryBytes: 8 * MIB, diskPayloadMinBytes: 64 * 1024 }, async (ctx) => {
    for (let i = 0; i < 20; i++) await publish(ctx, "disk", big()); // 40 MiB, budget 8 MiB
    await publish(ctx, "disk", "small");
    assertEquals(ctx.broker.memory.held, 21 * MESSAGE_OVERHEAD_BYTES + 5);
    const q = (await ctx.call("GET", "/api/queues")).body[0];
    assertEquals(q.held_bytes, ctx.broker.memory.held);
    const m = await consume(ctx, "disk");
    assertEquals(
      m.payload.length,
      Math.ceil(2 * MIB / 3) * 4,
      "read back from the WAL file",
    );
  });
});

Deno.test("idempotency keys count against the budget for their window, then give it back", async () => {
  await withBroker({ maxMemoryBytes: 64 * 1024 }, async (ctx) => {
    let refused = 0;
    for (let i = 0; i < 200 && !refused; i++) {
      const res = await ctx.call("POST", "/publish/keys", {
        body: "x",
        headers: { "idempotency-key": `${i}-${"k".repeat(200)}` },
      });
      if (res.status === 429) refused++;
      else {
        assertEquals(res.status, 201, res.text);
        await consume(ctx, "keys", "auto_ack=true"); // the message itself is gone at once
      }
    }
    assertEquals(refused, 1, "the keys alone filled the budget");
    await ctx.tick(5 * 60_000 + 1); // the window ends
    assertEquals(ctx.broker.memory.held, 0);
    await publish(ctx, "keys", "room again");
  });
});

/** The bytes the broker holds, as /api/stats says (asking over HTTP lets the server run). */
async function heldBytes(ctx: TestBroker): Promise<number> {
  return (await ctx.call("GET", "/api/stats")).body.memory.held_bytes;
}

/** Opens a publish whose headers declare `declared` bytes and sends only `sent` of them. */
async function stalledPublish(ctx: TestBroker, path: string, declared: number, sent: string) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(ctx.url).port) });
  await conn.write(
    new TextEncoder().encode(
      `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${declared}\r\n\r\n${sent}`,
    ),
  );
  return conn;
}

Deno.test("stalled bodies hold the bytes they sent, not the Content-Length they declared", async () => {
  await withBroker({ ...IN_MEMORY, maxMemoryBytes: 8 * MIB }, async (ctx) => {
    const slow = [
      await stalledPublish(ctx, "/publish/slow", 2 * MIB, "ab"),
      await stalledPublish(ctx, "/publish/slow", 2 * MIB, "cd"),
      await stalledPublish(ctx, "/publish/slow/batch", 4 * MIB, "[{"),
    ];
    try {
      await eventually(async () => await heldBytes(ctx) === 6, 5_000, "the bodies' first bytes");
      // 6 bytes of the 8 MiB are held, not 8 MiB: three 2 MiB messages still fit.
      for (let i = 0; i < 3; i++) {
        const res = await ctx.call("POST", "/publish/other", { body: big() });
        assertEquals(res.status, 201, res.text);
      }
      assertEquals(await heldBytes(ctx), 3 * (2 * MIB + MESSAGE_OVERHEAD_BYTES) + 6);
    } finally {
      for (const c of slow) c.close();
    }
    // The broker sees the clients leave as their body reads fail; then their bytes are free.
    await eventually(
      async () => await heldBytes(ctx) === 3 * (2 * MIB + MESSAGE_OVERHEAD_BYTES),
      5_000,
      "the abandoned bodies' bytes given back",
    );
  });
});

Deno.test("a body whose bytes would pass the budget as they arrive is cut with 429 memory_full", async () => {
  await withBroker({ ...IN_MEMORY, maxMemoryBytes: 3 * MIB }, async (ctx) => {
    await publish(ctx, "m", big());
    // Chunked: no length to refuse it by, so its bytes are counted until they do not fit.
    const chunk = "x".repeat(256 * 1024);
    const chunks = Array.from({ length: 8 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const res = await rawRequest(
      ctx.url,
      "POST /publish/m HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
        chunks.join("") + "0\r\n\r\n",
    );
    assertRawProblem(res, 429, "memory_full");
    assertMatch(JSON.parse(res.body).detail, /BROKER_MAX_MEMORY/);
    assertEquals(
      await heldBytes(ctx),
      2 * MIB + MESSAGE_OVERHEAD_BYTES,
      "the cut body holds nothing",
    );
    await publish(ctx, "m", "small");
  });
});
