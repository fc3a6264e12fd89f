/**
 * Compaction keeps a long-lived topic's WAL file proportional to what it still holds, without
 * losing the held messages or the idempotency keys still in their window; purge shrinks the
 * file to its header and settings, and delete removes it.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { decodeRecord, FILE_HEADER_BYTES, FRAME_HEADER_BYTES } from "../../lib/storage/record.ts";
import { RecordType } from "../../lib/storage/record.ts";
import { type ChildBroker, logLines, start, stop, withDataDir } from "../_support/child.ts";
import { fileSize, walPath } from "../_support/files.ts";
import { consumeList, json, queues, textOf, tryPublish } from "../_support/http.ts";

const ENV = {
  BROKER_COMPACT_MIN_BYTES: "65536",
  BROKER_COMPACT_RATIO: "2",
  BROKER_LOG_LEVEL: "debug",
};
const ROUNDS = 4;
const PER_ROUND = 5_000;
/** What the compacted file of 10 small messages and 11 keys may weigh. */
const COMPACTED_BOUND_BYTES = 16 * 1024;

/** The record types of a WAL file, in order (the file must be whole). */
async function recordTypes(path: string): Promise<{ types: RecordType[]; sizes: number[] }> {
  const bytes = await Deno.readFile(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const types: RecordType[] = [];
  const sizes: number[] = [];
  for (let pos = FILE_HEADER_BYTES; pos < bytes.length;) {
    const len = view.getUint32(pos, true);
    const body = bytes.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + len);
    assertEquals(body.length, len, `${path}: frame at ${pos} is torn`);
    types.push(decodeRecord(body).type);
    sizes.push(FRAME_HEADER_BYTES + len);
    pos += FRAME_HEADER_BYTES + len;
  }
  return { types, sizes };
}

/** Publishes `payloads` to `topic` with 32 requests at a time; every one must answer 201. */
async function publishMany(child: ChildBroker, topic: string, payloads: string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < payloads.length) {
      const p = payloads[next++]!;
      const r = await tryPublish(child.url, topic, p);
      assertEquals(r.status, 201, `${p}: ${JSON.stringify(r.body)}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

/** Polls (bounded) until `path` is at most `bound` bytes; returns its size then. */
async function sizeSettlesBelow(
  child: ChildBroker,
  path: string,
  bound: number,
): Promise<number> {
  const deadline = Date.now() + 10_000;
  let size = await fileSize(path) ?? 0;
  while (size > bound && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20)); // compaction runs on the broker's sweep timer
    size = await fileSize(path) ?? 0;
  }
  const compactions = logLines(child).filter((l) => l.msg === "compacted").slice(-3);
  assert(
    size <= bound,
    `${path} is ${size} bytes, more than ${bound}; last compactions: ${
      JSON.stringify(compactions)
    }`,
  );
  return size;
}

Deno.test({
  name: "compaction keeps a long-lived topic's WAL small; held messages and keys survive",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const topic = "long";
      const path = walPath(dir, topic);
      let child = await start(dir, ENV);

      // Ten messages that stay (in flight, never acked), each with an idempotency key.
      const keep: { id: string; payload: string }[] = [];
      for (let i = 0; i < 10; i++) {
        const r = await tryPublish(child.url, topic, `keep-${i}`, "", {
          "Idempotency-Key": `keep-key-${i}`,
        });
        assertEquals(r.status, 201);
        keep.push({ id: String(r.body.id), payload: `keep-${i}` });
      }
      const leased = await consumeList(child.url, topic, "limit=10&visibility=1h");
      assertEquals(leased.map(textOf), keep.map((k) => k.payload));
      // One keyed message that is acked: its key must still dedupe inside the window.
      const gone = await tryPublish(child.url, topic, "gone", "", {
        "Idempotency-Key": "gone-key",
      });
      assertEquals(gone.status, 201);
      assertEquals(
        (await consumeList(child.url, topic, "limit=1&auto_ack=true")).map(textOf),
        ["gone"],
      );

      const sizes: number[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        await publishMany(
          child,
          topic,
          Array.from({ length: PER_ROUND }, (_, i) => `r${round}-${i}`),
        );
        // Take them all; odd rounds ack in batches, even rounds auto_ack.
        let taken = 0;
        for (let call = 0; call < 100 && taken < PER_ROUND; call++) {
          const auto = round % 2 === 0;
          const got = await consumeList(
            child.url,
            topic,
            `limit=1000${auto ? "&auto_ack=true" : ""}`,
          );
          assert(got.length > 0, `round ${round}: queue empty after ${taken}`);
          taken += got.length;
          if (auto) continue;
          const res = await fetch(`${child.url}/ack/${topic}`, {
            method: "POST",
            body: JSON.stringify({ ids: got.map((m) => m.id) }),
            headers: { "content-type": "application/json" },
          });
          const body = await json<{ acked: number; not_found: string[] }>(res);
          assertEquals(res.status, 200);
          assertEquals(body, { acked: got.length, not_found: [] });
        }
        assertEquals(taken, PER_ROUND);
        sizes.push(await sizeSettlesBelow(child, path, COMPACTED_BOUND_BYTES));
      }

      const { types, sizes: frameSizes } = await recordTypes(path);
      const publishFrame = frameSizes[types.indexOf(RecordType.Publish)]!;
      const worth = ROUNDS * PER_ROUND * publishFrame;
      const finalSize = sizes[sizes.length - 1]!;
      assert(
        finalSize * 50 < worth,
        `${finalSize} bytes on disk for ${ROUNDS * PER_ROUND} records of ${publishFrame} bytes`,
      );
      assertEquals(types.filter((t) => t === RecordType.Publish).length, 10, `${types}`);

      // A crash right after: the compacted file replays to the same state.
      await stop(child, "SIGKILL");
      child = await start(dir, ENV);
      const recovered = logLines(child).find((l) => l.msg === "recovered");
      assertEquals(recovered?.messages, 10, JSON.stringify(recovered));
      const held = await consumeList(child.url, topic, "peek=true&limit=1000");
      assertEquals(held.map((m) => [m.id, textOf(m)]), keep.map((k) => [k.id, k.payload]));
      for (const [key, id] of [["keep-key-4", keep[4]!.id], ["gone-key", gone.body.id]]) {
        const again = await tryPublish(child.url, topic, "dup", "", {
          "Idempotency-Key": String(key),
        });
        assertEquals(again.status, 200, `${key}: ${JSON.stringify(again.body)}`);
        assertEquals(again.body.deduplicated, true);
        assertEquals(again.body.id, id);
      }
      console.log(`file size after each round: ${sizes.join(", ")} bytes`);
      await stop(child, "SIGTERM");
    }),
});

Deno.test({
  name: "purge shrinks the WAL to header and settings; delete removes the file",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const topic = "purgeme";
      const path = walPath(dir, topic);
      let child = await start(dir, ENV);
      const created = await fetch(`${child.url}/api/topics`, {
        method: "POST",
        body: JSON.stringify({ name: topic, policy: "drop-oldest", retain: "1h" }),
        headers: { "content-type": "application/json" },
      });
      await created.body?.cancel();
      assertEquals(created.status, 201);
      const empty = await fileSize(path);
      assert(empty !== undefined && empty > FILE_HEADER_BYTES, "header and META written");
      const metaOnly = await recordTypes(path);
      assertEquals(metaOnly.types, [RecordType.Meta]);

      await publishMany(child, topic, Array.from({ length: 3_000 }, (_, i) => `p-${i}`));
      assertEquals((await consumeList(child.url, topic, "limit=100")).length, 100); // some in flight
      const full = (await fileSize(path))!;
      assert(full > 3_000 * 50, `${full} bytes after 3000 publishes`);

      const res = await fetch(`${child.url}/api/queues/purge?queue=${topic}`, { method: "DELETE" });
      const body = await json(res);
      assertEquals(res.status, 200, JSON.stringify(body));
      assertEquals(body, { queue: topic, purged: 3_000 });
      assertEquals(
        await fileSize(path),
        empty,
        "the purged file is back to header + META",
      );
      assertEquals((await recordTypes(path)).types, [RecordType.Meta]);

      await stop(child, "SIGKILL");
      child = await start(dir, ENV);
      const q = (await queues(child.url)).get(topic);
      assert(q, "the purged topic still exists");
      assertEquals(q.depth + q.in_flight + q.delayed, 0);
      assertEquals(q.policy, "drop-oldest", "settings survive the purge");
      assertEquals(q.retain, "1h");
      assertEquals((await tryPublish(child.url, topic, "after")).status, 201);

      const del = await fetch(`${child.url}/api/queues/delete?queue=${topic}`, {
        method: "DELETE",
      });
      const delBody = await json(del);
      assertEquals(del.status, 200, JSON.stringify(delBody));
      assertEquals(delBody, { queue: topic, deleted: true });
      assertEquals(
        await fileSize(path),
        undefined,
        "the WAL file is gone once delete answers",
      );

      await stop(child, "SIGKILL");
      child = await start(dir, ENV);
      assertEquals(
        (await queues(child.url)).has(topic),
        false,
        "a deleted topic stays deleted",
      );
      assertEquals(await fileSize(path), undefined);

      // The name can be used again at once: a fresh topic with default settings.
      assertEquals((await tryPublish(child.url, topic, "reborn")).status, 201);
      await stop(child, "SIGKILL");
      child = await start(dir, ENV);
      const reborn = (await queues(child.url)).get(topic);
      assertEquals(reborn?.policy, "reject", JSON.stringify(reborn));
      assertEquals(reborn?.retain, null);
      assertEquals((await consumeList(child.url, topic, "peek=true&limit=10")).map(textOf), [
        "reborn",
      ]);
      await stop(child, "SIGTERM");
    }),
});

Deno.test({
  name: "a compaction interrupted by a crash (a leftover .wal.compact) is discarded at start-up",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const topic = "interrupted";
      let child = await start(dir, ENV);
      await publishMany(child, topic, ["a", "b", "c"]);
      await stop(child, "SIGKILL");
      const leftover = `${walPath(dir, topic)}.compact`;
      // Half a rewrite: a header and a torn frame, as a kill during compaction leaves it.
      const original = await Deno.readFile(walPath(dir, topic));
      await Deno.writeFile(leftover, original.slice(0, FILE_HEADER_BYTES + 20));

      child = await start(dir, ENV);
      assertEquals(await fileSize(leftover), undefined, "the partial rewrite is removed");
      assertEquals(await Deno.readFile(walPath(dir, topic)), original, "the WAL is untouched");
      const got = (await consumeList(child.url, topic, "peek=true&limit=10")).map(textOf).sort();
      assertEquals(got, ["a", "b", "c"]);
      assertEquals(
        (await queues(child.url)).size,
        1,
        "no topic made from the leftover file",
      );
      await stop(child, "SIGTERM");
    }),
});
