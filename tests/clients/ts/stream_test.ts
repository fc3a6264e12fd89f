/**
 * `ferry.stream()` against a real broker: live messages and broadcasts, filters, resuming with
 * Last-Event-ID after a network cut and in a later stream, `event: reset` after a restart
 * surfaced through onReset, a silent connection replaced, and the signal ending it.
 */

import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { settle } from "../../_support/http.ts";
import { startProxy } from "../../_support/proxy.ts";
import { startRestartable } from "../../_support/restartable.ts";
import { withLiveBroker } from "../../_support/server.ts";
import { Inbox, within } from "../../_support/wait.ts";
import { type EventStream, Ferry, type Message } from "../../../clients/ts/mod.ts";

/** Reads `events` in the background into an inbox; `done` settles when the loop ends. */
function drain(events: EventStream) {
  const inbox = new Inbox<Message>();
  const done = (async () => {
    for await (const m of events) inbox.push(m);
  })();
  return { inbox, done, texts: () => inbox.items.map((m) => m.payload_text) };
}

Deno.test("stream(): stored messages and broadcasts arrive live, nothing is consumed, lastEventId follows", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const ac = new AbortController();
    const events = ferry.stream("orders", { signal: ac.signal });
    const r = drain(events);
    await settle(b);
    const p = await ferry.publish("orders", "first");
    await ferry.publish("orders", "flash", { broadcast: true });
    await ferry.publish("orders", "second");
    const got = await r.inbox.take(3);
    assertEquals(r.texts(), ["first", "flash", "second"]);
    assertEquals(got[0]!.id, p.id);
    assertMatch(events.lastEventId ?? "", /^\d+$/);
    assertEquals((await ferry.consume("orders", { limit: 10 })).length, 2, "all still there");
    ac.abort();
    await within(r.done, 1_000, "the stream's end after abort");
  });
});

Deno.test("stream() with a filter yields only the matching JSON messages", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const ac = new AbortController();
    const r = drain(ferry.stream("f", { filter: { key: "kind", value: "a" }, signal: ac.signal }));
    await settle(b);
    for (const kind of ["a", "b", "a"]) await ferry.publish("f", { kind });
    await ferry.publish("f", "not json");
    await ferry.publish("f", { kind: "a", last: true });
    await r.inbox.take(3);
    assertEquals(r.texts(), ['{"kind":"a"}', '{"kind":"a"}', '{"kind":"a","last":true}']);
    ac.abort();
    await r.done;
  });
});

Deno.test("stream(): after a network cut it reconnects and resumes with Last-Event-ID, missing nothing", async () => {
  await withLiveBroker(async (b) => {
    const proxy = startProxy(b.url);
    try {
      const ferry = new Ferry({ url: proxy.url });
      const direct = new Ferry({ url: b.url });
      const ac = new AbortController();
      const failures = new Inbox<unknown>();
      const resets = new Inbox<string>();
      const r = drain(
        ferry.stream("feed", { signal: ac.signal, onError: failures.push, onReset: resets.push }),
      );
      await settle(b);
      await direct.publish("feed", "m1");
      await direct.publish("feed", "m2");
      await r.inbox.take(2);
      proxy.down = true;
      proxy.cut();
      await failures.take(1);
      // Published while the reader is away: the broker's ring keeps them for the resume.
      await direct.publish("feed", "m3");
      await direct.publish("feed", "m4");
      proxy.down = false;
      await r.inbox.take(4, 10_000);
      await direct.publish("feed", "m5");
      await r.inbox.take(5);
      assertEquals(r.texts(), ["m1", "m2", "m3", "m4", "m5"]);
      assertEquals(resets.items, []);
      ac.abort();
      await r.done;
    } finally {
      await proxy.close();
    }
  });
});

Deno.test("stream({ lastEventId }) resumes where an earlier stream stopped", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const first = ferry.stream("log");
    const seen: string[] = [];
    const reading = (async () => {
      for await (const m of first) {
        seen.push(m.payload_text!);
        if (seen.length === 2) break;
      }
    })();
    await settle(b);
    for (const t of ["a", "b", "c", "d"]) await ferry.publish("log", t);
    await reading;
    assertEquals(seen, ["a", "b"]);
    const ac = new AbortController();
    const r = drain(ferry.stream("log", { lastEventId: first.lastEventId, signal: ac.signal }));
    await r.inbox.take(2);
    assertEquals(r.texts(), ["c", "d"]);
    ac.abort();
    await r.done;
  });
});

Deno.test("stream(): messages that left the topic before the resume are surfaced through onReset, and the stream goes on", async () => {
  const r = await startRestartable();
  try {
    const ferry = new Ferry({ url: r.url });
    const ac = new AbortController();
    const resets = new Inbox<string>();
    const failures = new Inbox<unknown>();
    const events = drain(
      ferry.stream("news", { signal: ac.signal, onReset: resets.push, onError: failures.push }),
    );
    await settle(r.broker);
    await ferry.publish("news", "before");
    await events.inbox.take(1);
    await r.restart({
      beforeClose: async (old) => {
        await failures.take(1);
        // Stored and consumed while the reader is away: gone before it can resume.
        const direct = new Ferry({ url: old.url });
        await direct.publish("news", "missed");
        assertEquals((await direct.consume("news", { autoAck: true, limit: 10 })).length, 2);
      },
    });
    const [reason] = await resets.take(1, 10_000, "resets");
    assertMatch(reason!, /^1 message after \d+ no longer held; data was missed$/);
    await ferry.publish("news", "after");
    await events.inbox.take(2);
    assertEquals(events.texts(), ["before", "after"]);
    ac.abort();
    await events.done;
  } finally {
    await r.close();
  }
});

Deno.test("stream(): event: shutdown is a restart to wait out: onShutdown hears it, no error, and it resumes after the restart", async () => {
  const r = await startRestartable();
  try {
    const ferry = new Ferry({ url: r.url });
    const ac = new AbortController();
    const shutdowns = new Inbox<string>();
    const resets = new Inbox<string>();
    const failures = new Inbox<unknown>();
    const events = drain(ferry.stream("news", {
      signal: ac.signal,
      onShutdown: shutdowns.push,
      onReset: resets.push,
      onError: failures.push,
    }));
    await settle(r.broker);
    await ferry.publish("news", "before");
    await events.inbox.take(1);
    await r.broker.broker.drain(); // what SIGTERM does first
    assertEquals(await shutdowns.take(1), ["the broker is stopping"]);
    await r.restart();
    await ferry.publish("news", "after");
    await events.inbox.take(2, 10_000);
    assertEquals(events.texts(), ["before", "after"]);
    assertEquals(resets.items, []);
    const ended = failures.items.filter((e) => /ended the event stream/.test(String(e)));
    assertEquals(ended, [], "the end after a shutdown is no failure");
    ac.abort();
    await events.done;
  } finally {
    await r.close();
  }
});

Deno.test("stream(): a connection silent for idleTimeoutMs is replaced, and no message is lost", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const ac = new AbortController();
    const failures = new Inbox<unknown>();
    const r = drain(
      ferry.stream("quiet", { signal: ac.signal, idleTimeoutMs: 200, onError: failures.push }),
    );
    await settle(b);
    await ferry.publish("quiet", "first");
    await r.inbox.take(1);
    const [idle] = await failures.take(1);
    assertMatch(String(idle), /No event or ping for 200 ms/);
    await ferry.publish("quiet", "still here"); // most likely while it reconnects
    await r.inbox.take(2, 10_000);
    assertEquals(r.texts(), ["first", "still here"]);
    ac.abort();
    await r.done;
    assert(failures.items.length >= 1);
  });
});
