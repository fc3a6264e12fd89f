/**
 * The `Wal` contract (lib/storage/wal.ts), one body run against every implementation: FileWal
 * over a real file, MemoryWal, and ReplicatedWal over a real FileWal with a real Replicator whose
 * one follower is an in-process link that acks each message it is sent (no network needed).
 * Where MemoryWal differs because it keeps no file, the test says so in its name and checks
 * what MemoryWal does instead.
 */

import { assert, assertEquals, assertRejects, assertStrictEquals } from "../../_support/assert.ts";
import { Logger, silentLogger } from "../../../lib/log.ts";
import { FileWal } from "../../../lib/storage/file_wal.ts";
import { MemoryWal } from "../../../lib/storage/memory_wal.ts";
import type { Appended, DurableHook, Wal } from "../../../lib/storage/wal.ts";
import {
  decodeRecord,
  encodeRecord,
  FILE_HEADER_BYTES,
  FRAME_HEADER_BYTES,
  frameSize,
  type PublishRecord,
  RecordType,
  type WalRecord,
} from "../../../lib/storage/record.ts";
import { replicatedOpenWal } from "../../../lib/cluster/replicated_wal.ts";
import { type ReplicaLink, Replicator } from "../../../lib/cluster/replicator.ts";
import { decodeMessage } from "../../../lib/cluster/replica_stream.ts";
import { publishRecord } from "../_broker.ts";
import type { BrokerError } from "../../../lib/errors.ts";
import { Topic, topicSettings } from "../../../lib/topic.ts";

/** One log under test, and what the test may look at besides the `Wal` interface. */
interface Subject {
  readonly wal: Wal;
  /** The file the log writes, when it keeps one. */
  readonly path: string | undefined;
  /** The frames its followers were sent, in order (ReplicatedWal only). */
  readonly shipped: Uint8Array[] | undefined;
  /** While true, the follower holds its acks back (ReplicatedWal only). */
  holdAcks?: (hold: boolean) => void;
  dispose(): Promise<void>;
}

interface OpenOptions {
  onDurable?: DurableHook;
  /** A log whose file cannot be opened, so its first flush fails it for good. */
  broken?: boolean;
}

interface Implementation {
  name: string;
  /** Whether it keeps a file: MemoryWal does not, and the tests say what it does instead. */
  file: boolean;
  open(opts?: OpenOptions): Promise<Subject>;
}

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "ferry-wal-contract-" });
}

function fileWal(dir: string, opts: OpenOptions): FileWal {
  const path = opts.broken ? `${dir}/missing/t.wal` : `${dir}/t.wal`;
  return new FileWal(path, dir, 0, {
    fsync: "always",
    log: silentLogger,
    onDurable: opts.onDurable,
  });
}

/** A follower on an in-process link: it acks every message once it has it (as if on disk). */
function follower(replicator: Replicator) {
  const shipped: Uint8Array[] = [];
  let hold = false;
  let held: number[] = [];
  // attach() sends the snapshot before it returns the session: ack a moment later.
  const ack = (index: number) => queueMicrotask(() => replicator.ack(session, index));
  const link: ReplicaLink = {
    send(msg) {
      const { index, entries } = decodeMessage(msg);
      for (const e of entries) if (e.kind === "record") shipped.push(e.frame);
      if (hold) held.push(index);
      else ack(index);
    },
    bufferedAmount: 0,
    close() {},
  };
  const session = replicator.attach("follower", link);
  return {
    shipped,
    holdAcks(on: boolean) {
      hold = on;
      if (!on) held.forEach(ack);
      if (!on) held = [];
    },
  };
}

const IMPLEMENTATIONS: Implementation[] = [
  {
    name: "FileWal",
    file: true,
    async open(opts = {}) {
      const dir = await tempDir();
      const wal = fileWal(dir, opts);
      return {
        wal,
        path: wal.path,
        shipped: undefined,
        async dispose() {
          await wal.close();
          await Deno.remove(dir, { recursive: true });
        },
      };
    },
  },
  {
    name: "MemoryWal",
    file: false,
    open(opts = {}) {
      const wal = new MemoryWal(opts.onDurable);
      return Promise.resolve({
        wal,
        path: undefined,
        shipped: undefined,
        dispose: () => wal.close(),
      });
    },
  },
  {
    name: "ReplicatedWal",
    file: true,
    async open(opts = {}) {
      const dir = await tempDir();
      const replicator = new Replicator({
        needed: 1,
        log: new Logger("error", () => {}),
        sync: { setSync: () => Promise.resolve(true) },
      });
      replicator.activate(() => []);
      const f = follower(replicator);
      let inner: FileWal | undefined;
      const wal = replicatedOpenWal(() => inner = fileWal(dir, opts), replicator)("t", { size: 0 });
      // The follower is recorded as synchronous once it has acked its (empty) snapshot.
      await new Promise((r) => setTimeout(r, 0));
      assertEquals(replicator.standbys, ["follower"], "the follower counts toward the quorum");
      return {
        wal,
        path: inner!.path,
        shipped: f.shipped,
        holdAcks: f.holdAcks,
        async dispose() {
          await wal.close();
          replicator.deactivate("test over");
          await Deno.remove(dir, { recursive: true });
        },
      };
    },
  },
];

function key(seq: number): WalRecord {
  return { type: RecordType.Key, seq, key: `k${seq}`, id: `id${seq}`, at: seq };
}

function publish(seq: number, payload: string): PublishRecord {
  return publishRecord({ nextSeq: () => seq }, `m${seq}`, payload, {
    timestamp: 1,
    headers: ["x-a", "b"],
  });
}

/** The seqs of the whole frames in the file, read without changing it (zeros end the log). */
async function seqsIn(path: string): Promise<number[]> {
  const b = await Deno.readFile(path);
  const view = new DataView(b.buffer);
  const seqs: number[] = [];
  for (let pos = FILE_HEADER_BYTES; pos + FRAME_HEADER_BYTES <= b.length;) {
    const len = view.getUint32(pos, true);
    const end = pos + FRAME_HEADER_BYTES + len;
    if (len === 0 || end > b.length) break;
    seqs.push(decodeRecord(b.subarray(pos + FRAME_HEADER_BYTES, end)).seq);
    pos = end;
  }
  return seqs;
}

/** Bytes `[offset, offset + n)` of the file. */
async function readAt(path: string, offset: number, n: number): Promise<Uint8Array> {
  return (await Deno.readFile(path)).slice(offset, offset + n);
}

/** Lets timers, I/O and the replicator's turn run (long enough for an fdatasync). */
const settle = () => new Promise((r) => setTimeout(r, 30));

/** `p`, or a rejection if it is still pending after `ms`: a refusal must not hang. */
async function within<T>(p: Promise<T>, ms = 5_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Tracks which promises have resolved, in the order they did. */
function tracker() {
  const order: number[] = [];
  return {
    order,
    watch(n: number, p: Promise<void>): Promise<void> {
      return p.then(() => void order.push(n));
    },
  };
}

for (const impl of IMPLEMENTATIONS) {
  const t = (name: string, fn: () => Promise<void>) => Deno.test(`${impl.name}: ${name}`, fn);
  const memory = (note: string) => impl.file ? "" : ` (MemoryWal: ${note})`;

  t(
    `append() returns a durable promise; records become durable in append order${
      memory("at once, on no disk")
    }`,
    async () => {
      const s = await impl.open();
      const { order, watch } = tracker();
      const done: Promise<void>[] = [];
      for (let i = 1; i <= 5; i++) done.push(watch(i, s.wal.append(key(i)).durable));
      await Promise.resolve(); // a later turn's records form a later batch
      for (let i = 6; i <= 40; i++) done.push(watch(i, s.wal.append(key(i)).durable));
      const first = s.wal.append(key(41)).durable;
      await first;
      if (s.path) {
        // Durable means on disk: when #41 resolves, the file holds it and all before it.
        assertEquals(await seqsIn(s.path), range(1, 41), "in the file once durable");
      }
      await Promise.all(done);
      assertEquals(order, range(1, 40));
      await s.dispose();
    },
  );

  t(
    `append(r, after): r and every later record wait for \`after\`; earlier ones do not${
      memory("every record is durable at once, so `after` holds nothing back")
    }`,
    async () => {
      const s = await impl.open();
      const gate = Promise.withResolvers<void>();
      const { order, watch } = tracker();
      const before = watch(1, s.wal.append(key(1)).durable);
      const gated = watch(2, s.wal.append(key(2), gate.promise).durable);
      const later = watch(3, s.wal.append(key(3)).durable);
      await before;
      await settle();
      if (impl.file) {
        assertEquals(order, [1], "the gated record and the one after it wait");
        assertEquals(await seqsIn(s.path!), [1], "neither is written before the gate opens");
      } else {
        assertEquals(order, [1, 2, 3]);
      }
      gate.resolve();
      await Promise.all([gated, later]);
      assertEquals(order, [1, 2, 3]);
      if (s.path) assertEquals(await seqsIn(s.path), [1, 2, 3]);
      await s.dispose();
    },
  );

  t(
    `append(r, after) with an \`after\` that rejects fails the log with its error${
      memory("never fails: `after` is not waited for")
    }`,
    async () => {
      const s = await impl.open();
      const gate = Promise.withResolvers<void>();
      gate.promise.catch(() => {}); // MemoryWal never looks at it
      const gated = s.wal.append(key(1), gate.promise).durable;
      gate.reject(new Error("the copy failed"));
      if (impl.file) {
        const e = await assertRejects(() => within(gated));
        assertEquals(e.message, "the copy failed");
        assertStrictEquals(s.wal.failed, e);
        await assertRejects(() => within(s.wal.append(key(2)).durable));
      } else {
        await gated;
        assertEquals(s.wal.failed, undefined);
      }
      await s.dispose();
    },
  );

  t(
    "barrier() resolves once everything appended before it is durable, and at once when idle",
    async () => {
      const s = await impl.open();
      await s.wal.barrier(); // nothing appended yet
      const { order, watch } = tracker();
      const all: Promise<void>[] = [];
      for (let i = 1; i <= 3; i++) all.push(watch(i, s.wal.append(key(i)).durable));
      all.push(watch(4, s.wal.append(key(4), Promise.resolve()).durable)); // a batch of its own
      await s.wal.barrier();
      if (s.path) {
        assertEquals(await seqsIn(s.path), [1, 2, 3, 4], "on disk when barrier() resolved");
      }
      assertEquals(order, [1, 2, 3, 4], "durable when barrier() resolved");
      await Promise.all(all);
      await s.wal.barrier(); // idle again
      await s.dispose();
    },
  );

  t("the onDurable hook hears every record in append order, before its appender", async () => {
    const events: string[] = [];
    const s = await impl.open({
      onDurable: (records) => events.push(...records.map((r) => `hook ${r.seq}`)),
    });
    const done: Promise<void>[] = [];
    const append = (r: WalRecord, after?: Promise<unknown>) =>
      done.push(s.wal.append(r, after).durable.then(() => void events.push(`done ${r.seq}`)));
    for (let i = 1; i <= 3; i++) append(key(i));
    await Promise.resolve();
    append(key(4), Promise.resolve());
    append(key(5));
    await Promise.all(done);
    await s.wal.barrier();
    const hooked = events.filter((e) => e.startsWith("hook"));
    assertEquals(hooked, range(1, 5).map((i) => `hook ${i}`), "in append order, once each");
    for (let i = 1; i <= 5; i++) {
      assert(
        events.indexOf(`hook ${i}`) < events.indexOf(`done ${i}`),
        `record ${i} heard before its appender: ${events}`,
      );
    }
    await s.dispose();
  });

  t(
    `compact() keeps the records appended while it runs, durable and in order${
      memory("there is no file to rewrite; compact() resolves and appends go on")
    }`,
    async () => {
      const s = await impl.open();
      for (let i = 1; i <= 20; i++) await s.wal.append(key(i)).durable;
      const generation = s.wal.generation;
      const racing: Promise<void>[] = [];
      let racingPayload: { generation: number; offset: number | undefined } | undefined;
      await s.wal.compact(() => {
        queueMicrotask(() => {
          for (let i = 21; i <= 29; i++) racing.push(s.wal.append(key(i)).durable);
          const gen = s.wal.generation;
          const a = s.wal.append(publish(30, "moved along"));
          racing.push(a.durable);
          racingPayload = { generation: gen, offset: a.payloadOffset };
        });
        return [range(16, 20).map((i) => encodeRecord(key(i)))]; // only these still matter
      });
      await Promise.all(racing);
      for (let i = 31; i <= 35; i++) await s.wal.append(key(i)).durable;
      if (impl.file) {
        assertEquals(s.wal.generation, generation + 1, "a new file generation");
        assertEquals(await seqsIn(s.path!), range(16, 35));
        // An offset handed out during the compaction is in the old generation; locate() moves it.
        const at = s.wal.locate(racingPayload!.generation, racingPayload!.offset!);
        assert(at, "a payload appended during the compaction is located in the new file");
        assertEquals(text(await readAt(s.path!, at.offset, 11)), "moved along");
      } else {
        assertEquals(racingPayload, undefined, "the snapshot is not even taken");
        assertEquals([s.wal.generation, s.wal.bytes], [0, 0]);
      }
      await s.dispose();
    },
  );

  t(
    `close() waits for what is queued, then refuses appends; remove() deletes the file${
      memory("keeps nothing: close() resolves at once and appends are still accepted")
    }${followersNote(impl, "close() waits for this node's disk, not for the followers")}`,
    async () => {
      const s = await impl.open();
      const { order, watch } = tracker();
      for (let i = 1; i <= 3; i++) void watch(i, s.wal.append(key(i)).durable);
      await s.wal.close();
      if (!s.shipped) assertEquals(order, [1, 2, 3], "all queued was durable at close()");
      if (impl.file) {
        assertEquals(await seqsIn(s.path!), [1, 2, 3], "all queued was on disk at close()");
        const e = await assertRejects(() => within(s.wal.append(key(4)).durable));
        assert(e.message.includes("closed"), e.message);
        await s.wal.close(); // twice is fine
        await s.wal.remove();
        assertEquals(await Deno.stat(s.path!).catch(() => undefined), undefined, "file removed");
      } else {
        await s.wal.append(key(4)).durable;
        await s.wal.remove();
      }
      await s.dispose();
    },
  );

  t(
    `a failure is for good: \`failed\` is set; appends, barrier() and compact() reject${
      memory("has nothing to fail: `failed` stays undefined")
    }`,
    async () => {
      const s = await impl.open({ broken: true });
      const first = s.wal.append(key(1));
      assertEquals(first.size, frameSize(key(1)));
      if (impl.file) {
        const e = await assertRejects(() => within(first.durable));
        assertStrictEquals(s.wal.failed, e);
        const refused = s.wal.append(publish(2, "p"));
        assertStrictEquals(
          await assertRejects(() => within(refused.durable)),
          e,
          "the same error, for good",
        );
        assertEquals(refused.payloadOffset, undefined, "a refused record is not in the file");
        assertStrictEquals(await assertRejects(() => within(s.wal.barrier())), e);
        assertStrictEquals(await assertRejects(() => within(s.wal.compact(() => []))), e);
      } else {
        await first.durable;
        await s.wal.append(key(2)).durable;
        assertEquals(s.wal.failed, undefined);
      }
      await s.dispose();
    },
  );

  t(
    `a Topic over a failed log: messages of the failed batch leave, later records are refused before they apply (storage_failed)${
      memory("never fails: every record applies")
    }`,
    async () => {
      const s = await impl.open({ broken: true });
      const topic = new Topic("t", topicSettings({}, 0), s.wal);
      // Two records queued in one turn: the batch that fails holds both.
      const first = topic.commit(publish(1, "lost"), 0);
      const second = topic.commit(publish(2, "lost too"), 0);
      assertEquals(topic.messages.size, 2, "applied in the turn of the append");
      if (impl.file) {
        for (const p of [first, second]) {
          const e = await assertRejects(() => within(p));
          assertEquals((e as BrokerError).code, "storage_failed", e.message);
        }
        assertEquals(topic.messages.size, 0, "what never reached the disk is not held");
        assertEquals(topic.defaultGroup.readyCount, 0, "nor offered");
        const refused = topic.commit(publish(3, "refused"), 0);
        assertEquals(topic.messages.size, 0, "refused before any change");
        assertEquals(topic.seq, 2, "no sequence number taken");
        const e = await assertRejects(() => within(refused));
        assertEquals((e as BrokerError).code, "storage_failed");
        assert(e.message.startsWith('Cannot write to "t": its log failed ('), e.message);
        assertEquals(topic.messages.size, 0);
      } else {
        await first;
        await second;
        assertEquals(topic.messages.size, 2);
      }
      await s.dispose();
    },
  );

  t(
    "append(r, after, true) also hands back r's frame, as the file and followers get it",
    async () => {
      const s = await impl.open();
      const records = [key(1), publish(2, "hello"), publish(3, "x".repeat(70_000))];
      const frames = records.map((r) => s.wal.append(r, undefined, true).frame);
      const plain = s.wal.append(key(4));
      assertEquals(plain.frame, undefined, "no frame unless asked");
      assertEquals(frames, records.map(encodeRecord));
      await plain.durable;
      if (s.shipped) assertEquals(s.shipped, [...records, key(4)].map(encodeRecord));
      await s.dispose();
    },
  );

  t(
    `append() result: \`size\` bytes at the old end are the frame; payload at payloadOffset${
      memory("no file: size is the frame's would-be size, payloadOffset undefined, bytes 0")
    }`,
    async () => {
      const s = await impl.open();
      const records = [
        key(1),
        publish(2, "hello"),
        key(3),
        publish(4, ""),
        publish(5, "x".repeat(5000)),
      ];
      const results: { r: WalRecord; a: Appended; end: number }[] = [];
      for (const r of records) {
        const end = s.wal.bytes;
        const a = s.wal.append(r);
        results.push({ r, a, end });
        assertEquals(a.size, frameSize(r), `record ${r.seq}: size is its frame's`);
        assertEquals(s.wal.bytes, impl.file ? end + a.size : 0, "bytes grows by size");
      }
      await Promise.all(results.map((x) => x.a.durable));
      for (const { r, a, end } of results) {
        if (!impl.file) {
          assertEquals(a.payloadOffset, undefined);
          continue;
        }
        assertEquals(await readAt(s.path!, end, a.size), encodeRecord(r), `frame ${r.seq}`);
        if (r.type !== RecordType.Publish) {
          assertEquals(a.payloadOffset, undefined, `record ${r.seq} has no payload`);
          continue;
        }
        assertEquals(a.payloadOffset, end + a.size - r.payload.length);
        assertEquals(await readAt(s.path!, a.payloadOffset!, r.payload.length), r.payload);
      }
      if (s.shipped) {
        assertEquals(s.shipped, records.map(encodeRecord), "followers get the same frames");
      }
      await s.dispose();
    },
  );

  t(
    `durable also waits for the followers' quorum${
      impl.name === "ReplicatedWal" ? "" : ` (${impl.name}: has no followers; the disk is all)`
    }`,
    async () => {
      const s = await impl.open();
      s.holdAcks?.(true);
      let done = false;
      const durable = s.wal.append(key(1)).durable.then(() => void (done = true));
      await settle();
      if (s.path) assertEquals(await seqsIn(s.path), [1], "on the local disk");
      assertEquals(done, !s.holdAcks, "not durable before the follower acks");
      s.holdAcks?.(false);
      await durable;
      await s.dispose();
    },
  );
}

/** A note in a test's name for the one implementation with followers. */
function followersNote(impl: Implementation, note: string): string {
  return impl.name === "ReplicatedWal" ? ` (ReplicatedWal: ${note})` : "";
}

function range(a: number, b: number): number[] {
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

function text(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}

Deno.test({
  name: "ReplicatedWal: barrier() waits for the followers' quorum too",
  async fn() {
    const s = await IMPLEMENTATIONS.find((i) => i.name === "ReplicatedWal")!.open();
    s.holdAcks!(true);
    const durable = s.wal.append(key(1)).durable;
    let barrier = false;
    const done = s.wal.barrier().then(() => void (barrier = true));
    await settle();
    assertEquals(barrier, false, "barrier() resolved before the follower acked");
    s.holdAcks!(false);
    await Promise.all([durable, done]);
    await s.dispose();
  },
});
