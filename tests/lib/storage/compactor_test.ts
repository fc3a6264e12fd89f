import { DelegatingWal } from "../../_support/wal.ts";
import { assert, assertEquals } from "../../_support/assert.ts";
import { Compactor, SMALL_LIVE_BYTES } from "../../../lib/storage/compactor.ts";
import { silentLogger } from "../../../lib/log.ts";
import type { Topic } from "../../../lib/topic.ts";
import { FileWal } from "../../../lib/storage/file_wal.ts";
import { RecordType } from "../../../lib/storage/record.ts";
import { bytes, memTopic, openBroker, put, T0, texts } from "../_broker.ts";

/**
 * A real FileWal that hands out the promise of each compaction it was asked for, and may run a
 * hook after each snapshot chunk is built (requests that run while the rewrite is under way).
 */
class WatchedWal extends DelegatingWal {
  readonly compactions: Promise<void>[] = [];
  afterChunk: ((i: number) => void) | undefined;
  override compact(snapshot: () => Iterable<Uint8Array[]>): Promise<void> {
    const hook = this.afterChunk;
    const p = this.inner.compact(() => {
      const chunks = snapshot()[Symbol.iterator]();
      let i = 0;
      const next = () => {
        const r = chunks.next();
        if (!r.done) hook?.(i++);
        return r;
      };
      return { [Symbol.iterator]: () => ({ next }) };
    });
    this.compactions.push(p);
    return p;
  }
}

/** A topic over a watched FileWal in a temp dir, holding `n` messages of `size` bytes. */
async function fileTopic(n: number, size = 100) {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  const wal = new WatchedWal(
    new FileWal(`${dir}/t.wal`, dir, 0, { fsync: "always", log: silentLogger }),
  );
  const topic = memTopic("t", {}, undefined, wal);
  for (let i = 0; i < n; i++) await put(topic, `m${i}`, "x".repeat(size));
  return {
    topic,
    wal,
    async close() {
      await wal.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Acks every held message of the default group but the first `keep`. */
function ackAllBut(topic: Topic, keep: number, now = T0): Promise<void> {
  const ids = [...topic.messages.keys()].slice(keep);
  return topic.commit({ type: RecordType.Ack, seq: topic.nextSeq(), group: "", ids }, now);
}

function compactor(compactMinBytes: number, now: () => number = () => T0) {
  return new Compactor({ compactMinBytes, compactRatio: 4 }, silentLogger, now);
}

Deno.test("Compactor.maybeCompact() leaves a file under compactMinBytes alone, however oversized", async () => {
  const f = await fileTopic(20);
  await ackAllBut(f.topic, 1);
  assert(f.wal.bytes > 4 * f.topic.liveBytes, "oversized");
  compactor(f.wal.bytes + 1).maybeCompact(f.topic, T0);
  assertEquals(f.wal.compactions.length, 0);
  compactor(f.wal.bytes).maybeCompact(f.topic, T0);
  assertEquals(f.wal.compactions.length, 1, "at the floor it is due");
  await f.wal.compactions[0];
  await f.close();
});

Deno.test("Compactor.maybeCompact() compacts only past compactRatio × the live bytes, once at a time", async () => {
  const f = await fileTopic(20);
  const c = compactor(0);
  c.maybeCompact(f.topic, T0);
  assertEquals(f.wal.compactions.length, 0, "every record still matters");
  await ackAllBut(f.topic, 1);
  const before = f.wal.bytes;
  c.maybeCompact(f.topic, T0);
  c.maybeCompact(f.topic, T0); // the first one is still running
  assertEquals(f.wal.compactions.length, 1);
  await f.wal.compactions[0];
  assert(f.wal.bytes < before / 4, `${f.wal.bytes} of ${before}`);
  assert(f.wal.bytes <= 4 * f.topic.liveBytes, "in proportion now");
  c.maybeCompact(f.topic, T0 + 60_000);
  assertEquals(f.wal.compactions.length, 1);
  assertEquals([...f.topic.messages.keys()], ["m0"]);
  await f.close();
});

Deno.test("Compactor.maybeCompact() keeps a small live set within 2 ×, a large one within the ratio", async () => {
  // Small: 20 messages of 100 bytes, 9 left: the file is between 2 and 4 × what is live.
  const small = await fileTopic(20);
  await ackAllBut(small.topic, 9);
  const smallRatio = small.wal.bytes / small.topic.liveBytes;
  assert(smallRatio > 2 && smallRatio <= 4, `small ratio ${smallRatio}`);
  compactor(0).maybeCompact(small.topic, T0);
  assertEquals(small.wal.compactions.length, 1, "a small live set is rewritten past 2 ×");
  await small.wal.compactions[0];
  await small.close();
  // Large: 100 messages of 64 KiB, 40 left (2.5 MiB live), again between 2 and 4 ×.
  const large = await fileTopic(100, 64 * 1024);
  await ackAllBut(large.topic, 40);
  assert(large.topic.liveBytes > SMALL_LIVE_BYTES, "large");
  const largeRatio = large.wal.bytes / large.topic.liveBytes;
  assert(largeRatio > 2 && largeRatio <= 4, `large ratio ${largeRatio}`);
  compactor(0).maybeCompact(large.topic, T0);
  assertEquals(large.wal.compactions.length, 0, "a large one waits for the ratio, 4 ×");
  await ackAllBut(large.topic, 20); // 1.25 MiB live: still large, and the file past 4 ×
  assert(large.topic.liveBytes > SMALL_LIVE_BYTES, "still large");
  compactor(0).maybeCompact(large.topic, T0);
  assertEquals(large.wal.compactions.length, 1, "past 4 ×");
  await large.wal.compactions[0];
  await large.close();
});

Deno.test("Compactor.compact() tries again a second later when appends left the file oversized", async () => {
  const f = await fileTopic(20);
  let now = T0;
  const c = compactor(1024 * 1024, () => now); // far above the file: only a retry is due
  // A batch ack lands while the snapshot is being written: it is kept after the snapshot.
  f.wal.afterChunk = (i) => {
    if (i === 1) ackAllBut(f.topic, 1, now);
  };
  await c.compact(f.topic);
  f.wal.afterChunk = undefined;
  assert(f.wal.bytes > 4 * f.topic.liveBytes, "still oversized");
  c.maybeCompact(f.topic, T0 + 999);
  assertEquals(f.wal.compactions.length, 1);
  c.maybeCompact(f.topic, T0 + 1_000);
  assertEquals(f.wal.compactions.length, 2, "below compactMinBytes, but a retry");
  await f.wal.compactions[1];
  now = T0 + 1_000;
  c.maybeCompact(f.topic, T0 + 5_000);
  assertEquals(f.wal.compactions.length, 2, "in proportion: no more retries");
  await f.close();
});

Deno.test("Compactor.forget() drops the retry of a deleted topic", async () => {
  const f = await fileTopic(20);
  const c = compactor(1024 * 1024);
  f.wal.afterChunk = (i) => {
    if (i === 1) ackAllBut(f.topic, 1);
  };
  await c.compact(f.topic);
  c.forget(f.topic);
  c.maybeCompact(f.topic, T0 + 1_000);
  assertEquals(f.wal.compactions.length, 1);
  await f.close();
});

Deno.test("Compactor.compact() shrinks a real FileWal; a reopened broker has the live messages", async () => {
  const t = await openBroker({ dataDir: "temp" });
  const b = t.broker;
  for (let i = 0; i < 50; i++) {
    await b.publish("t", bytes(`m${i}`), i === 49 ? { delayMs: 60_000 } : {});
  }
  await b.consume("t", { limit: 47, autoAck: true });
  const path = `${t.dir}/t.wal`;
  const before = (await Deno.stat(path)).size;
  await compactor(0, () => t.now).compact(b.findTopic("t")!);
  const after = (await Deno.stat(path)).size;
  assert(after < before / 4, `${after} of ${before}`);
  assertEquals(after, b.findTopic("t")!.wal.bytes);
  await b.close();

  const again = await openBroker({ dataDir: t.dir }, T0 + 60_000);
  const left = await again.broker.consume("t", { limit: 10 });
  assertEquals(texts(left), ["m47", "m48", "m49"]);
  await again.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test({
  // Regression (found by this twin): META is not counted in Topic.liveBytes, so a topic emptied of messages (live bytes 0,
  // taken as 1) is "oversized" once its file holds more than compactRatio bytes, which a
  // header and META always are (about 75 bytes). Every compaction of an emptied topic then
  // leaves it oversized, and maybeCompact() rewrites, fsyncs and renames its file once a
  // second for ever.
  name: "Compactor stops compacting a topic emptied down to its META record",
  fn: async () => {
    const f = await fileTopic(20);
    await f.topic.commit({
      type: RecordType.Meta,
      seq: f.topic.nextSeq(),
      ...f.topic.settings,
      goneSeq: 0,
    }, T0);
    await ackAllBut(f.topic, 0);
    let now = T0;
    const c = compactor(0, () => now);
    c.maybeCompact(f.topic, now);
    await f.wal.compactions[0];
    for (let s = 1; s <= 3; s++) {
      now = T0 + s * 1_000;
      c.maybeCompact(f.topic, now);
      await Promise.all(f.wal.compactions);
    }
    assertEquals(f.wal.compactions.length, 1, `${f.wal.bytes} bytes left, rewritten again`);
    await f.close();
  },
});
