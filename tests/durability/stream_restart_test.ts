/**
 * GET /stream/{topic} across real restarts of a broker on its data dir (behind a proxy that
 * keeps its address): a reader that resumes with Last-Event-ID gets every message stored after
 * that id that the topic still holds, in order and once; `event: reset`, with the number missed,
 * only when a message after it has left the topic; ids only grow, across restarts and across a
 * compaction of the topic's WAL.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { call, consumeList, publish } from "../_support/http.ts";
import { type Restartable, startRestartable } from "../_support/restartable.ts";
import { openSse, type SseEvent } from "../_support/sse.ts";
import { Compactor } from "../../lib/storage/compactor.ts";
import { silentLogger } from "../../lib/log.ts";

const text = (e: SseEvent) => JSON.parse(e.data!).payload_text as string;

/**
 * Resumes after `lastId` and reads events (pings skipped) until `n` have come or none came for
 * a second, then closes: a test that expects more than comes fails on its assertion, not hangs.
 */
async function resume(r: Restartable, lastId: string | undefined, n: number): Promise<SseEvent[]> {
  const s = await openSse(`${r.url}/stream/t`, lastId ? { "last-event-id": lastId } : {});
  const out: SseEvent[] = [];
  try {
    assertEquals(s.status, 200);
    while (out.length < n) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const quiet = new Promise<"quiet">((res) => timer = setTimeout(() => res("quiet"), 1_000));
      const e = await Promise.race([s.next(), quiet]);
      clearTimeout(timer);
      if (e === "quiet" || e === undefined) break;
      if (e.comment === undefined) out.push(e);
    }
    return out;
  } finally {
    await s.close();
  }
}

/** Publishes each payload through the proxy, in order. */
async function publishAll(r: Restartable, ...payloads: string[]): Promise<void> {
  for (const p of payloads) await publish(r.url, "t", p);
}

/** Acks the messages whose payloads are `texts` (consuming every ready one, limit 100). */
async function ackOnly(r: Restartable, ...texts: string[]): Promise<void> {
  const taken = await consumeList(r.url, "t", "limit=100&visibility=1h");
  for (const m of taken) {
    if (!texts.includes(m.payload_text!)) continue;
    assertEquals((await call(r.url, "POST", `/ack/t/${m.id}`)).status, 204);
  }
}

/** Rewrites the topic's WAL file from what it holds, as the broker's sweep would. */
/**
 * Publishes m1..m6 to "t" while a stream reads them, closes the stream, and gives each payload's
 * event id.
 */
async function streamSix(r: Restartable): Promise<(payload: string) => string> {
  const live = await openSse(`${r.url}/stream/t`);
  await publishAll(r, "m1", "m2", "m3", "m4", "m5", "m6");
  const seen = await live.take(6);
  await live.close();
  return (payload) => seen.find((e) => text(e) === payload)!.id!;
}

async function compact(r: Restartable): Promise<void> {
  const broker = r.broker.broker;
  const topic = broker.findTopic("t")!;
  const before = topic.wal.generation;
  await new Compactor(broker.config, silentLogger, broker.now).compact(topic);
  assertEquals(topic.wal.generation, before + 1, "the file was rewritten");
}

Deno.test({
  name:
    "GET /stream after a restart resumes from what the topic holds: the new messages, once, in order",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const r = await startRestartable();
    try {
      const live = await openSse(`${r.url}/stream/t`);
      await publishAll(r, "m1", "m2", "m3");
      const first = await live.take(3);
      await live.close();
      assertEquals(first.map(text), ["m1", "m2", "m3"]);

      await r.restart();
      await publishAll(r, "m4", "m5", "m6");
      const again = await resume(r, first[2]!.id, 3);
      assertEquals(again.map((e) => e.event), [undefined, undefined, undefined], "no reset");
      assertEquals(again.map(text), ["m4", "m5", "m6"]);
      const ids = [...first, ...again].map((e) => Number(e.id));
      assert(ids.every((id, i) => i === 0 || id > ids[i - 1]!), `ids grow: ${ids}`);

      // Nothing after the last id: only what comes next.
      const s = await openSse(`${r.url}/stream/t`, { "last-event-id": again[2]!.id! });
      await publishAll(r, "m7");
      const [next] = await s.take(1);
      await s.close();
      assertEquals([next!.event, text(next!)], [undefined, "m7"]);
      assert(Number(next!.id) > ids.at(-1)!);
    } finally {
      await r.close();
    }
  },
});

Deno.test({
  name:
    "GET /stream sends event: reset with the number missed only when a message after the id has left the topic",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const r = await startRestartable();
    try {
      const id = await streamSix(r);

      await r.restart();
      await ackOnly(r, "m4", "m5"); // two messages after m3's id leave the topic
      const [reset, m6] = await resume(r, id("m3"), 2);
      assertEquals(reset!.event, "reset");
      assertEquals(JSON.parse(reset!.data!).missed, 2, reset!.data);
      assertEquals([m6!.id, text(m6!)], [id("m6"), "m6"], "then what the topic still holds");
      // From m5's id nothing after it has left: no reset.
      const [after5] = await resume(r, id("m5"), 1);
      assertEquals([after5!.event, text(after5!)], [undefined, "m6"]);

      // The acks are in the WAL: a restart knows the count too.
      await r.restart();
      const [reset2, again6] = await resume(r, id("m3"), 2);
      assertEquals([reset2!.event, JSON.parse(reset2!.data!).missed], ["reset", 2]);
      assertEquals(text(again6!), "m6");

      // A message that expired after the id is missed as well.
      await publish(r.url, "t", "short", "ttl=1s");
      await publishAll(r, "m8");
      const tail = await resume(r, id("m6"), 2);
      assertEquals(tail.map(text), ["short", "m8"]);
      await new Promise((res) => setTimeout(res, 1_100)); // the TTL runs on the broker's clock
      await r.restart(); // replay drops the expired message
      const [reset3, m8] = await resume(r, id("m6"), 2);
      assertEquals([reset3!.event, JSON.parse(reset3!.data!).missed], ["reset", 1]);
      assertEquals(text(m8!), "m8");
    } finally {
      await r.close();
    }
  },
});

Deno.test({
  name:
    "GET /stream resumes after a compaction and restart; ids keep growing; a reset when the count is gone",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const r = await startRestartable();
    try {
      const id = await streamSix(r);
      await ackOnly(r, "m4", "m5");

      await compact(r); // the ACK records and m4, m5 are gone from the file
      await r.restart();
      await publishAll(r, "m7");
      const [after5, m7] = await resume(r, id("m5"), 2);
      assertEquals([after5!.event, text(after5!), text(m7!)], [undefined, "m6", "m7"]);
      assert(Number(m7!.id) > Number(id("m6")), `ids grow across compaction: ${m7!.id}`);

      const [reset, m6] = await resume(r, id("m3"), 2);
      assertEquals(reset!.event, "reset", "m4 and m5 left before the compaction");
      assertEquals(text(m6!), "m6");

      // Everything gone and compacted: the next id is still larger than any given before.
      await ackOnly(r, "m1", "m2", "m3", "m6", "m7");
      await compact(r);
      await r.restart();
      await publishAll(r, "m9");
      const [m9] = await resume(r, m7!.id, 1);
      assertEquals(m9!.event, undefined, `nothing after m7 left: ${m9!.data}`);
      assertEquals(text(m9!), "m9");
      assert(Number(m9!.id) > Number(m7!.id), `ids grow: ${m9!.id} after ${m7!.id}`);
    } finally {
      await r.close();
    }
  },
});
