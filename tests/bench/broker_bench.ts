/**
 * Micro benchmarks of the broker's hot paths without HTTP: `deno bench -A tests/bench/broker_bench.ts`.
 * Run before and after touching lib/topic.ts, lib/delivery/group.ts, lib/storage/file_wal.ts or lib/storage/record.ts.
 */

import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { allocPayload } from "../../lib/memory/slab.ts";
import { encodeRecord, RecordType } from "../../lib/storage/record.ts";

const payload = new Uint8Array(1024).fill(120);
const memory = await Broker.open(defaultConfig({ dataDir: ":memory:", maxQueue: 1e9 }), {
  tick: false,
});
const dir = await Deno.makeTempDir({ prefix: "ferry-bench-" });
const disk = await Broker.open(defaultConfig({ dataDir: dir, fsync: "never", maxQueue: 1e9 }), {
  tick: false,
});
globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));

function fresh(): Uint8Array {
  const p = allocPayload(payload.length);
  p.set(payload);
  return p;
}

Deno.bench("publish 1KiB memory", { group: "publish", baseline: true }, async () => {
  await memory.publish("bench", fresh());
});

Deno.bench("publish 1KiB wal (fsync never)", { group: "publish" }, async () => {
  await disk.publish("bench", fresh());
});

Deno.bench("publish+consume+ack 1KiB memory", { group: "round trip" }, async () => {
  await memory.publish("rt", fresh());
  const [m] = await memory.consume("rt");
  await memory.ack("rt", "", [m!.msg.id]);
});

Deno.bench("consume 100 + batch ack, memory", { group: "round trip" }, async (b) => {
  for (let i = 0; i < 100; i++) await memory.publish("batch", fresh());
  b.start();
  const ms = await memory.consume("batch", { limit: 100 });
  await memory.ack("batch", "", ms.map((m) => m.msg.id));
  b.end();
});

Deno.bench("encodeRecord publish 1KiB", { group: "wal" }, () => {
  encodeRecord({
    type: RecordType.Publish,
    seq: 1,
    id: "01938c2e-1111-7222-8333-444455556666",
    timestamp: 1,
    priority: 1,
    merge: false,
    expiresAt: 0,
    redriveCount: 0,
    idemKey: undefined,
    reason: undefined,
    origin: undefined,
    headers: ["content-type", "application/octet-stream"],
    deliveries: undefined,
    dueAt: 0,
    payload,
  });
});
