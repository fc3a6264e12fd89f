/**
 * `ferry.subscribe()` against a real broker: spies on patterns, consuming subscriptions that ack
 * after the handler and requeue when it throws, refusals, settling over HTTP when the socket is
 * gone, and reconnecting and subscribing again after the broker restarts behind the same address.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { startProxy } from "../../_support/proxy.ts";
import { startRestartable } from "../../_support/restartable.ts";
import { withLiveBroker } from "../../_support/server.ts";
import { start, stop, withDataDir } from "../../_support/child.ts";
import { eventually, Inbox, within } from "../../_support/wait.ts";
import { Ferry, FerryConnectionError, FerryError, type Message } from "../../../clients/ts/mod.ts";
import { reconnectDelay } from "../../../clients/ts/backoff.ts";

/** True once `topic` (and `group`) has nothing ready or in flight. */
async function settled(ferry: Ferry, topic: string, group = ""): Promise<boolean> {
  const t = (await ferry.stats()).topics[topic];
  const g = group ? t?.groups[group] : t;
  return g !== undefined && g.depth === 0 && g.in_flight === 0;
}

Deno.test("reconnectDelay() backs off 1 s, 2 s, 4 s … up to 32 s", () => {
  assertEquals(
    Array.from({ length: 8 }, (_, i) => reconnectDelay(i)),
    [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 32_000, 32_000],
  );
});

Deno.test("subscribe(): a spy hears the topics its pattern matches, and unsubscribe() ends it", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const wild = new Inbox<Message>();
    const sub = ferry.subscribe("orders.*", wild.push);
    await sub.ready;
    await ferry.publish("orders.eu", "e1");
    await ferry.publish("payments", "p1");
    await ferry.publish("orders.us", "u1");
    const got = await wild.take(2);
    assertEquals(got.map((m) => [m.topic, m.payload_text]), [["orders.eu", "e1"], [
      "orders.us",
      "u1",
    ]]);
    assertEquals(await ferry.consume("orders.eu"), [got[0]!], "a spy takes nothing");

    sub.unsubscribe("orders.*");
    const exact = new Inbox<Message>();
    sub.subscribe("orders.eu", exact.push);
    await sub.ready; // frames are handled in order: the unsubscribe is done
    await ferry.publish("orders.eu", "e2");
    assertEquals((await exact.take(1)).map((m) => m.payload_text), ["e2"]);
    assertEquals(wild.items.length, 2, "the unsubscribed pattern heard nothing more");
    await sub.close();
  });
});

Deno.test("subscribe() with a group consumes: acked after the handler, requeued with the error's message when it throws", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    await ferry.createGroup("tasks", "workers");
    const seen = new Inbox<string>();
    const errors = new Inbox<string>();
    const sub = ferry.subscribe("tasks", (msg) => {
      seen.push(`${msg.payload_text}${msg.retry_count}${msg.reason ? ` ${msg.reason}` : ""}`);
      if (msg.payload_text === "t2" && msg.retry_count === 0) throw new Error("flaky t2");
    }, { group: "workers", prefetch: 2, onError: (e) => errors.push((e as Error).message) });
    await sub.ready;
    await ferry.publish("tasks", "t1");
    await ferry.publish("tasks", "t2");
    assertEquals(await seen.take(3), ["t10", "t20", "t21 flaky t2"]);
    assertEquals(errors.items, ["flaky t2"]);
    await eventually(() => settled(ferry, "tasks", "workers"), 5_000, "both acked");
    const copies = await ferry.consume("tasks", { limit: 10 });
    assertEquals(copies.length, 2, "the default group keeps its own copies");
    await sub.close();
  });
});

Deno.test("subscribe(): a refused subscription rejects ready with the broker's error", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const reported = new Inbox<unknown>();
    const sub = ferry.subscribe("bad name!", () => {}, { group: "g", onError: reported.push });
    const e = await sub.ready.catch((e) => e);
    assert(e instanceof FerryError, String(e));
    assertEquals(e.code, "invalid_name");
    assertEquals((await reported.take(1))[0], e);
    await sub.close();
  });
});

Deno.test("subscribe(): a delivery whose socket closed while its handler ran is acked over HTTP", async () => {
  await withLiveBroker(async (b) => {
    const proxy = startProxy(b.url);
    try {
      const ferry = new Ferry({ url: proxy.url });
      let finish!: () => void;
      const working = new Promise<void>((r) => finish = r);
      const started = new Inbox<Message>();
      const lost = new Inbox<unknown>();
      const sub = ferry.subscribe("slow", async (msg) => {
        started.push(msg);
        await working;
      }, { group: "g", onError: lost.push });
      await sub.ready;
      await ferry.publish("slow", "job");
      await started.take(1);
      proxy.cut(); // the network fails under the socket
      assert((await lost.take(1))[0] instanceof FerryConnectionError);
      finish();
      await eventually(() => settled(ferry, "slow", "g"), 5_000, "acked over HTTP");
      assertEquals(started.items.length, 1, "not delivered twice");
      await sub.close();
    } finally {
      await proxy.close();
    }
  });
});

Deno.test("subscribe(): after the broker restarts the socket reconnects and subscribes everything again", async () => {
  const r = await startRestartable();
  try {
    const ferry = new Ferry({ url: r.url });
    const news = new Inbox<string>();
    const jobs = new Inbox<string>();
    const closes = new Inbox<unknown>();
    const sub = ferry.subscribe("news.*", (m) => news.push(m.payload_text!), {
      onError: closes.push,
    });
    sub.subscribe("jobs", (m) => jobs.push(m.payload_text!), { group: "g" });
    await sub.ready;
    await ferry.publish("news.local", "before");
    await ferry.publish("jobs", "j-before");
    await news.take(1);
    await jobs.take(1);
    await eventually(() => settled(ferry, "jobs", "g"), 5_000, "the first delivery acked");

    await r.restart({
      beforeClose: async () => {
        assert((await closes.take(1))[0] instanceof FerryConnectionError, "the socket closed");
      },
    });
    const t0 = performance.now();
    await within(sub.ready, 10_000, "subscribed again");
    assert(performance.now() - t0 < 8_000, "reconnected within the first backoff steps");

    await ferry.publish("news.world", "after");
    await ferry.publish("jobs", "j-after");
    assertEquals(await news.take(2), ["before", "after"]);
    assertEquals(await jobs.take(2), ["j-before", "j-after"]);
    await eventually(() => settled(ferry, "jobs", "g"), 5_000, "the new delivery acked");
    await sub.close();
  } finally {
    await r.close();
  }
});

Deno.test({
  name:
    "subscribe(): a broker stopped by SIGTERM (close 1001) is waited out quietly, and the socket subscribes again",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let b = await start(dir);
      const port = b.port;
      const ferry = new Ferry({ url: b.url });
      const news = new Inbox<string>();
      const errors = new Inbox<unknown>();
      const sub = ferry.subscribe("news", (m) => news.push(m.payload_text!), {
        onError: errors.push,
      });
      try {
        await sub.ready;
        await ferry.publish("news", "before");
        await news.take(1);
        await stop(b, "SIGTERM"); // the broker drains: every socket closes with 1001
        b = await start(dir, {}, ["--port", String(port)]);
        await within(sub.ready, 10_000, "subscribed again");
        await ferry.publish("news", "after");
        assertEquals(await news.take(2), ["before", "after"]);
        assertEquals(errors.items.map(String), [], "a restart is no error");
      } finally {
        await sub.close();
      }
    }),
});
