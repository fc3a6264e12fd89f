/**
 * GET /consume/{topic} through the HTTP server: shapes by limit, empty queue, long-polling (on
 * topics that do not exist yet, and through a drain), auto_ack, peek, filters (and the work they
 * cost) and per-consume visibility.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import {
  assertEmpty,
  assertProblem,
  call,
  consume,
  type Json,
  publish,
  queues,
  settle,
  textOf,
} from "../_support/http.ts";
import { exists, walPath } from "../_support/files.ts";
import { eventually } from "../_support/wait.ts";
import { withBroker } from "../_support/server.ts";
import { FILTER_SCAN_WINDOW } from "../../lib/delivery/group.ts";
import { shardOf } from "../../lib/shard.ts";

Deno.test("GET /consume with limit=1 (the default) answers one Message object", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "c", "one");
    await publish(ctx, "c", "two");
    const msg = await consume(ctx, "c");
    assertEquals(Array.isArray(msg), false);
    assertEquals(msg.id, p.id);
    assertEquals(msg.topic, "c");
    assertEquals(msg.payload, btoa("one"));
    assertEquals(msg.payload_text, "one");
    assertEquals(msg.retry_count, 0);
    assertEquals(msg.timestamp, p.timestamp);
    const explicit = await consume(ctx, "c", "limit=1");
    assertEquals(Array.isArray(explicit), false);
    assertEquals(explicit.payload_text, "two");
  });
});

Deno.test("GET /consume with limit>1 answers an array of 1..limit messages", async () => {
  await withBroker({}, async (ctx) => {
    for (const t of ["a", "b", "c"]) await publish(ctx, "many", t);
    const two = await consume(ctx, "many", "limit=2");
    assert(Array.isArray(two));
    assertEquals(two.map(textOf), ["a", "b"]);
    const rest = await consume(ctx, "many", "limit=10");
    assert(Array.isArray(rest));
    assertEquals(rest.map(textOf), ["c"]);
  });
});

Deno.test("GET /consume on an empty queue is 404 queue_empty", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "e", "x");
    await consume(ctx, "e");
    await assertEmpty(ctx, "e");
    await assertEmpty(ctx, "e", "limit=5");
  });
});

Deno.test("GET /consume on a topic that never existed is 404", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("GET", "/consume/never-published");
    assertProblem(res, 404);
  });
});

Deno.test("GET /consume?timeout is woken by a publish and answers 200 with it", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/lp?timeout=5s");
    await settle(ctx.url);
    const p = await publish(ctx, "lp", "wake up");
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.id, p.id);
    assertEquals(res.body.payload_text, "wake up");
    await assertEmpty(ctx, "lp"); // handed to the waiter, not left in the queue
  });
});

Deno.test("GET /consume?timeout&limit>1 woken by a publish answers an array", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/lpa?timeout=5s&limit=5");
    await settle(ctx.url);
    await publish(ctx, "lpa", "first");
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assert(Array.isArray(res.body), res.text);
    assert(res.body.length >= 1);
    assertEquals(res.body[0].payload_text, "first");
  });
});

Deno.test("GET /consume?timeout answers 404 once the timeout passes", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/lpt?timeout=2s");
    await settle(ctx.url);
    await ctx.tick(2_000);
    assertProblem(await waiting, 404, "queue_empty");
    // A message published afterwards stays in the queue for the next consumer.
    await publish(ctx, "lpt", "after");
    assertEquals((await consume(ctx, "lpt")).payload_text, "after");
  });
});

Deno.test("GET /consume wakes each parked long-poll with its own message", async () => {
  await withBroker({}, async (ctx) => {
    const w1 = ctx.start("GET", "/consume/fair?timeout=5s");
    const w2 = ctx.start("GET", "/consume/fair?timeout=5s");
    await settle(ctx.url);
    await publish(ctx, "fair", "m1");
    await publish(ctx, "fair", "m2");
    const [r1, r2] = await Promise.all([w1, w2]);
    assertEquals(r1.status, 200, r1.text);
    assertEquals(r2.status, 200, r2.text);
    assertEquals([r1.body.payload_text, r2.body.payload_text].sort(), ["m1", "m2"]);
  });
});

Deno.test("GET /consume?timeout abandoned by its client does not swallow the next message", async () => {
  await withBroker({}, async (ctx) => {
    const ac = new AbortController();
    const gone = call(ctx.url, "GET", "/consume/ab?timeout=5s", { signal: ac.signal });
    await settle(ctx.url);
    ac.abort();
    await gone.catch(() => {});
    await settle(ctx.url); // let the broker see the closed connection
    const p = await publish(ctx, "ab", "for a live consumer");
    const m = await consume(ctx, "ab");
    assertEquals(m.id, p.id);
    assertEquals(m.retry_count, 0);
  });
});

Deno.test("GET /consume?timeout&filter_key waits for a matching message only", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/lf?timeout=5s&filter_key=type&filter_val=b");
    await settle(ctx.url);
    await publish(ctx, "lf", JSON.stringify({ type: "a" }));
    await publish(ctx, "lf", JSON.stringify({ type: "b" }));
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assertEquals(JSON.parse(textOf(res.body)), { type: "b" });
    const rest = await consume(ctx, "lf", "limit=10");
    assertEquals(rest.map((m: Json) => JSON.parse(textOf(m))), [{ type: "a" }]);
  });
});

Deno.test("GET /consume?auto_ack=true acknowledges at delivery", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "aa", "x");
    const msg = await consume(ctx, "aa", "auto_ack=true");
    assertEquals(msg.payload_text, "x");
    // Already acknowledged: a manual ack finds nothing and the lease never expires it back.
    assertProblem(await ctx.call("POST", `/ack/aa/${msg.id}`), 404, "message_not_found");
    await ctx.tick(60_000);
    await assertEmpty(ctx, "aa");
  });
});

Deno.test("GET /consume without auto_ack keeps the message in flight until its lease ends", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "lease", "x");
    await consume(ctx, "lease");
    await assertEmpty(ctx, "lease");
    await ctx.tick(31_000); // default BROKER_VISIBILITY is 30s
    const again = await consume(ctx, "lease");
    assertEquals(again.id, p.id);
    assertEquals(again.retry_count, 1);
  });
});

Deno.test("GET /consume?peek=true reads without consuming", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "pk", "look");
    await publish(ctx, "pk", "look2");
    const peeked = await consume(ctx, "pk", "peek=true");
    assertEquals(peeked.id, p.id);
    const peekedAgain = await consume(ctx, "pk", "peek=true&limit=10");
    assertEquals(peekedAgain.map(textOf), ["look", "look2"]);
    const taken = await consume(ctx, "pk");
    assertEquals(taken.id, p.id);
    assertEquals(taken.retry_count, 0);
  });
});

Deno.test("GET /consume?filter_key&filter_val takes only matching JSON messages", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "f", JSON.stringify({ type: "a", n: 1 }));
    await publish(ctx, "f", "type=b, not JSON");
    await publish(ctx, "f", JSON.stringify({ type: "b", n: 2 }));
    await publish(ctx, "f", JSON.stringify({ other: "b" }));
    await publish(ctx, "f", JSON.stringify(["type", "b"]));
    const b = await consume(ctx, "f", "filter_key=type&filter_val=b");
    assertEquals(JSON.parse(textOf(b)), { type: "b", n: 2 });
    const num = await consume(ctx, "f", "filter_key=n&filter_val=1");
    assertEquals(JSON.parse(textOf(num)), { type: "a", n: 1 });
    await assertEmpty(ctx, "f", "filter_key=type&filter_val=b");
    // Skipped messages stay, in order, for other consumers.
    const rest = await consume(ctx, "f", "limit=10");
    assertEquals(rest.map(textOf), [
      "type=b, not JSON",
      JSON.stringify({ other: "b" }),
      JSON.stringify(["type", "b"]),
    ]);
  });
});

Deno.test("GET /consume?filter_key alone matches messages that have the key", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "fk", JSON.stringify({ nope: 1 }));
    await publish(ctx, "fk", JSON.stringify({ urgent: false }));
    const m = await consume(ctx, "fk", "filter_key=urgent");
    assertEquals(JSON.parse(textOf(m)), { urgent: false });
    await assertEmpty(ctx, "fk", "filter_key=urgent");
  });
});

Deno.test("GET /consume?filter_key with a dotted path reaches nested keys", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "fd", JSON.stringify({ order: { status: "open" } }));
    await publish(ctx, "fd", JSON.stringify({ order: { status: "paid", total: 5 } }));
    const m = await consume(ctx, "fd", "filter_key=order.status&filter_val=paid");
    assertEquals(JSON.parse(textOf(m)).order.status, "paid");
    const t = await ctx.call("GET", "/consume/fd?filter_key=order.total&filter_val=5");
    assertProblem(t, 404, "queue_empty"); // the only match is in flight now
  });
});

Deno.test("GET /consume?filter_key never matches a non-JSON payload", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "fn", "type");
    await publish(ctx, "fn", '{"type": "a"'); // truncated JSON
    await publish(ctx, "fn", new Uint8Array([0xff, 0x00, 0x7b]));
    await assertEmpty(ctx, "fn", "filter_key=type");
    await assertEmpty(ctx, "fn", "filter_key=type&filter_val=a");
    const all = await consume(ctx, "fn", "limit=10&peek=true");
    assertEquals(all.length, 3);
  });
});

Deno.test("GET /consume?visibility sets the lease of this delivery", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "vis", "x");
    await consume(ctx, "vis", "visibility=5s");
    await ctx.tick(4_000);
    await assertEmpty(ctx, "vis");
    await ctx.tick(2_000);
    const again = await consume(ctx, "vis", "visibility=1m");
    assertEquals(again.id, p.id);
    assertEquals(again.retry_count, 1);
    await ctx.tick(40_000); // past the 30s default, inside the 1m lease
    await assertEmpty(ctx, "vis");
    await ctx.tick(21_000);
    assertEquals((await consume(ctx, "vis")).retry_count, 2);
  });
});

Deno.test("GET /consume messages carry the contract fields", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "fields", "x", "ttl=1h&priority=low", { "x-mq-k": "v" });
    const m: Json = await consume(ctx, "fields");
    for (const k of ["id", "topic", "payload", "payload_text", "timestamp", "retry_count"]) {
      assert(k in m, `Message lacks ${k}: ${JSON.stringify(m)}`);
    }
    assertEquals(m.priority, "low");
    assertEquals(m.headers, { "x-mq-k": "v" });
    assertEquals(Date.parse(m.expires_at) - Date.parse(m.timestamp), 3_600_000);
  });
});

Deno.test("GET /consume answers at most 4 MiB of payload, and acks only what it answered", async () => {
  await withBroker({ dataDir: ":memory:" }, async (ctx) => {
    const big = new Uint8Array(2 * 1024 * 1024).fill(0x41);
    for (let i = 0; i < 40; i++) {
      big[0] = 0x30 + (i % 10);
      await publish(ctx, "big", big.slice());
    }
    let taken = 0;
    while (taken < 40) {
      const got = await consume(ctx, "big", "limit=40&auto_ack=true");
      assert(Array.isArray(got) && got.length >= 1 && got.length <= 2, `${got.length} taken`);
      taken += got.length;
      const q = (await ctx.call("GET", "/api/queues")).body[0];
      assertEquals(
        q.depth + q.in_flight,
        40 - taken,
        "what was not answered is still held",
      );
      assertEquals(q.in_flight, 0, "nothing is left leased");
    }
    await assertEmpty(ctx, "big");
    for (let i = 0; i < 3; i++) await publish(ctx, "big", big.slice());
    const peeked = await consume(ctx, "big", "peek=true&limit=1000");
    assertEquals(peeked.length, 2, "a peek is bounded too");
  });
});

/** Waits, a round trip at a time, until `check` holds in the broker. */
async function until(ctx: { url: string }, check: () => boolean, what: string): Promise<void> {
  await eventually(async () => (await settle(ctx.url, 1), check()), 10_000, what);
}

Deno.test("GET /consume?filter_key: 20 parked long-polls look at each publish's message, not at 2,000 of 16 KiB", async () => {
  await withBroker({}, async (ctx) => {
    const pad = "x".repeat(16_344);
    for (let i = 0; i < 2_000; i += 100) {
      const batch = Array.from({ length: 100 }, (_, j) => ({
        payload_text: JSON.stringify({ k: "v", i: i + j, pad }),
      }));
      const res = await ctx.call("POST", "/publish/fdos/batch", { json: batch });
      assertEquals(res.status, 201, res.text);
    }
    const topic = ctx.broker.findTopic("fdos")!;
    const g = topic.defaultGroup;
    const polls = Array.from(
      { length: 20 },
      () => ctx.start("GET", "/consume/fdos?filter_key=nomatch&timeout=30s"),
    );
    await until(ctx, () => ctx.broker.consumers.count(topic) === 20, "20 polls parked");
    assert(g.examined <= 20 * FILTER_SCAN_WINDOW, `${g.examined} examined by 20 parking polls`);
    const parked = g.examined;
    for (let i = 0; i < 10; i++) await publish(ctx, "fdos", '{"k":"v"}');
    assertEquals(g.examined - parked, 10 * 20, "each publish: one look per parked poll");
    const match = await publish(ctx, "fdos", '{"nomatch":true}');
    await until(ctx, () => ctx.broker.consumers.count(topic) === 19, "one poll served");
    assertEquals((await ctx.call("POST", `/ack/fdos/${match.id}`)).status, 204);
    await ctx.tick(30_000);
    const answers = await Promise.all(polls);
    const served = answers.filter((r) => r.status === 200);
    assertEquals(served.map((r) => r.body.id), [match.id]);
    for (const r of answers.filter((r) => r.status !== 200)) assertProblem(r, 404, "queue_empty");
  });
});

Deno.test("GET /consume?timeout on a topic that does not exist creates no topic, file or listing", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/ordres?timeout=5s");
    await until(ctx, () => ctx.broker.consumers.waitingFor("ordres") === 1, "the poll waits");
    const nowhere = async () => {
      assertEquals(await exists(walPath(ctx.dataDir, "ordres")), false, "no WAL file");
      assertEquals((await queues(ctx)).has("ordres"), false, "not in /api/queues");
      const stats = await ctx.call("GET", "/api/stats");
      assertEquals(Object.keys(stats.body.topics).includes("ordres"), false, "not in /api/stats");
      assertEquals((await ctx.call("GET", "/api/topics/ordres")).status, 404);
    };
    await nowhere();
    await ctx.tick(5_000);
    assertProblem(await waiting, 404, "queue_empty");
    await nowhere();
  });
});

Deno.test("GET /consume?timeout on a topic that does not exist gets a broadcast, which creates nothing", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/flash-lp?timeout=5s");
    await until(ctx, () => ctx.broker.consumers.waitingFor("flash-lp") === 1, "the poll waits");
    const sent = await ctx.call("POST", "/publish/flash-lp?broadcast=true", { body: "now" });
    assertEquals([sent.status, sent.body.delivered_to], [200, 1], sent.text);
    const res = await waiting;
    assertEquals([res.status, res.body.payload_text], [200, "now"], res.text);
    assertEquals(ctx.broker.findTopic("flash-lp"), undefined);
  });
});

Deno.test("GET /consume?timeout&group= on a new topic gets its first publish, in a group made first", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/signups-lp?timeout=5s&group=mailer");
    await until(ctx, () => ctx.broker.consumers.waitingFor("signups-lp") === 1, "the poll waits");
    const p = await publish(ctx, "signups-lp", "ada@example.com");
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assertEquals([res.body.id, res.body.group], [p.id, "mailer"]);
    const groups = await ctx.call("GET", "/api/groups?topic=signups-lp");
    assertEquals(groups.status, 200, groups.text);
    assertEquals(groups.body.map((g: Json) => g.group), ["mailer"]);
    assertEquals((await consume(ctx, "signups-lp")).id, p.id, "the default group has it too");
    assert(await exists(walPath(ctx.dataDir, "signups-lp")), "the publish made the topic");
  });
});

Deno.test("GET /consume?timeout on a new topic waits for POST /api/topics, then its publishes", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/made-lp?timeout=5s&filter_key=k");
    await until(ctx, () => ctx.broker.consumers.waitingFor("made-lp") === 1, "the poll waits");
    const made = await ctx.call("POST", "/api/topics", { json: { name: "made-lp" } });
    assertEquals(made.status, 201, made.text);
    const topic = ctx.broker.findTopic("made-lp")!;
    assertEquals([ctx.broker.consumers.waitingFor("made-lp"), ctx.broker.consumers.count(topic)], [
      0,
      1,
    ]);
    await publish(ctx, "made-lp", '{"other":1}');
    const p = await publish(ctx, "made-lp", '{"k":1}');
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.id, p.id);
  });
});

Deno.test("GET /consume?timeout on a new topic at BROKER_MAX_TOPICS waits; its publish is refused", async () => {
  await withBroker({ maxTopics: 1 }, async (ctx) => {
    await publish(ctx, "one", "x");
    const waiting = ctx.start("GET", "/consume/two?timeout=5s");
    await until(ctx, () => ctx.broker.consumers.waitingFor("two") === 1, "the poll waits");
    assertProblem(
      await ctx.call("POST", "/publish/two", { body: "y" }),
      403,
      "topic_limit_reached",
    );
    await ctx.tick(5_000);
    assertProblem(await waiting, 404, "queue_empty");
    assertEquals([...(await queues(ctx)).keys()], ["one"]);
  });
});

Deno.test("GET /consume?timeout parked when the broker drains or shuts down answers 503 draining", async () => {
  for (const stop of ["POST /api/drain", "close"]) {
    await withBroker({}, async (ctx) => {
      await publish(ctx, "busy", "x");
      await consume(ctx, "busy", "auto_ack=true");
      const parked = ctx.start("GET", "/consume/busy?timeout=30s");
      const unborn = ctx.start("GET", "/consume/not-yet?timeout=30s&group=g");
      const topic = ctx.broker.findTopic("busy")!;
      await until(
        ctx,
        () => ctx.broker.consumers.count(topic) + ctx.broker.consumers.waitingFor("not-yet") === 2,
        "both polls wait",
      );
      if (stop === "close") await ctx.broker.close();
      else assertEquals((await ctx.call("POST", "/api/drain")).status, 200);
      for (const [res, name] of [[await parked, "busy"], [await unborn, "not-yet"]] as const) {
        assertProblem(res, 503, "draining");
        assertEquals(
          res.body.detail,
          `Stopped waiting for a message in "${name}": the broker is draining (stopping); ` +
            "retry once it has restarted",
          stop,
        );
        assertEquals(res.headers.get("retry-after"), "1", stop);
      }
    });
  }
});

Deno.test("GET /consume?timeout with BROKER_WORKERS=2: new topics wait uncreated, SIGINT answers 503", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, { BROKER_WORKERS: "2" });
    const names = ["lp-w0", "lp-w1", "lp-w2", "lp-w3"];
    assertEquals(new Set(names.map((t) => shardOf(t, 2))).size, 2, "both workers own some");
    const polls = names.map((t) => call(b.url, "GET", `/consume/${t}?timeout=30s&group=g`));
    for (const p of polls) p.catch(() => {}); // a failed check kills the broker under them
    await settle(b.url);
    const p = await publish(b, names[0]!, "first");
    const first = await polls[0]!;
    assertEquals([first.status, first.body.id, first.body.group], [200, p.id, "g"], first.text);
    assertEquals([...(await queues(b)).keys()], [names[0]], "only the published topic is listed");
    assertEquals((await stop(b, "SIGINT")).code, 0);
    for (const [i, res] of (await Promise.all(polls.slice(1))).entries()) {
      assertProblem(res, 503, "draining");
      assertMatch(
        res.body.detail,
        new RegExp(`^Stopped waiting for a message in "${names[i + 1]}"`),
      );
      assertEquals(await exists(walPath(dir, names[i + 1]!)), false, "no file for a wait");
    }
    assert(await exists(walPath(dir, names[0]!)));
  });
});
