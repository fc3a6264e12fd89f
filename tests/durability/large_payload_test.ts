/**
 * Large payloads come back byte-exact through every path a message takes: publish, peek,
 * consume, requeue into the DLQ, redrive, compaction of the WAL, SIGKILL and replay. Sizes sit
 * on both sides of BROKER_DISK_PAYLOAD_MIN's default (64 KiB) and go up to the 2 MiB limit, so
 * the same test guards payloads kept in memory and payloads served from the WAL file.
 */

import { assertEquals } from "../_support/assert.ts";
import { logLines, start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, drain, json, publish, requeue } from "../_support/http.ts";

const KIB = 1024;
const SIZES = [64 * KIB - 1, 64 * KIB, 64 * KIB + 1, 300 * KIB, 300 * KIB, 1024 * KIB, 2048 * KIB];
const ENV = {
  BROKER_COMPACT_MIN_BYTES: "65536",
  BROKER_COMPACT_RATIO: "2",
  BROKER_LOG_LEVEL: "debug",
};

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Random bytes (crypto.getRandomValues fills at most 64 KiB at a time); never valid UTF-8. */
function randomPayload(size: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  out[0] = 0xff; // not UTF-8, so the Base64 payload is the only copy in the answer
  return out;
}

/** The hash of a consumed message's Base64 payload. */
function hashOf(m: { payload: string }): Promise<string> {
  return sha256(Uint8Array.fromBase64(m.payload) as Uint8Array<ArrayBuffer>);
}

Deno.test({
  name: "payloads of 64 KiB - 1 to 2 MiB stay byte-exact through DLQ, redrive, compaction, SIGKILL",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let child = await start(dir, ENV);
      const hashes = new Map<string, string>(); // id → hash of what was published
      for (const size of [...SIZES, ...SIZES]) {
        const payload = randomPayload(size);
        hashes.set((await publish(child, "big", payload)).id, await sha256(payload));
      }
      // Peeks and consumes answer the bytes that were published.
      for (const m of await consumeList(child.url, "big", "peek=true&limit=1000")) {
        assertEquals(await hashOf(m), hashes.get(m.id), `peek of ${m.id}`);
      }
      // A message of its own topic goes to the DLQ by three requeues, then back by redrive.
      const poison = randomPayload(1024 * KIB);
      const poisonId = (await publish(child, "dl", poison)).id;
      hashes.set(poisonId, await sha256(poison));
      for (let attempt = 1; attempt <= 3; attempt++) {
        const [m] = await consumeList(child.url, "dl", "limit=1");
        assertEquals(await hashOf(m!), hashes.get(poisonId));
        assertEquals(
          (await requeue(child, m)).status,
          attempt < 3 ? "requeued" : "dead_lettered",
        );
      }
      const [dead] = await consumeList(child.url, "dl.dlq", "peek=true");
      assertEquals(await hashOf(dead!), hashes.get(poisonId), "the dead letter");
      const redrive = await fetch(`${child.url}/api/queues/redrive?queue=dl`, { method: "POST" });
      assertEquals((await json<{ moved: number }>(redrive)).moved, 1);
      const [redriven] = await consumeList(child.url, "dl", "peek=true");
      assertEquals(await hashOf(redriven!), hashes.get(poisonId), "the redriven message");
      // Acking half leaves the file mostly garbage: compaction rewrites it around the rest.
      const taken = await drain(child.url, "big", "limit=1000");
      const acked = new Set<string>();
      for (const [i, m] of taken.entries()) {
        assertEquals(await hashOf(m), hashes.get(m.id), `consume of ${m.id}`);
        if (i % 2) continue;
        const res = await fetch(`${child.url}/ack/big/${m.id}`, { method: "POST" });
        assertEquals(res.status, 204);
        await res.body?.cancel();
        acked.add(m.id);
      }
      assertEquals(taken.length, hashes.size - 1, "every message was taken once");
      await child.logged("compacted");
      await stop(child, "SIGKILL");

      child = await start(dir, ENV);
      const back = [
        ...await drain(child.url, "big", "limit=1000&auto_ack=true"),
        ...await drain(child.url, "dl", "limit=1000&auto_ack=true"),
      ];
      const found = new Map(
        await Promise.all(back.map(async (m) => [m.id, await hashOf(m)] as const)),
      );
      const expected = [...hashes].filter(([id]) => !acked.has(id));
      assertEquals([...found].sort(), expected.sort(), "what survives, byte for byte");
      assertEquals(logLines(child).filter((l) => l.level === "warn").length, 0);
      await stop(child, "SIGTERM");
    }),
});
