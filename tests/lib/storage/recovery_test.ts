import { assert, assertEquals } from "../../_support/assert.ts";
import { Logger, silentLogger } from "../../../lib/log.ts";
import { heldSize, MemoryBudget, MESSAGE_OVERHEAD_BYTES } from "../../../lib/memory/budget.ts";
import { PayloadFile } from "../../../lib/memory/payload_file.ts";
import { normalise, recover, type RecoveryOptions } from "../../../lib/storage/recovery.ts";
import { MemoryWal } from "../../../lib/storage/memory_wal.ts";
import { RecordType, type WalRecord } from "../../../lib/storage/record.ts";
import { bytes, memTopic, openBroker, publishRecord, T0 } from "../_broker.ts";

/** Recovery options over `dir` whose openWal records each call and keeps the readers to close. */
function options(dir: string, over: Partial<RecoveryOptions> = {}) {
  const opened: { name: string; size: number }[] = [];
  const readers: PayloadFile[] = [];
  const o: RecoveryOptions = {
    dataDir: dir,
    now: T0,
    log: silentLogger,
    memory: new MemoryBudget(Infinity),
    diskPayloadMin: Infinity,
    openWal: (name, size, replayed) => {
      opened.push({ name, size });
      readers.push(replayed);
      return new MemoryWal();
    },
    ...over,
  };
  return { o, opened, close: () => readers.forEach((r) => r.close()) };
}

/** A data dir written by a real broker; `write` runs against it before it closes. */
async function dataDir(
  write: (b: Awaited<ReturnType<typeof openBroker>>["broker"]) => Promise<unknown>,
  diskPayloadMinBytes = 64 * 1024,
) {
  const t = await openBroker({ dataDir: "temp", diskPayloadMinBytes });
  await write(t.broker);
  await t.broker.close();
  return t.dir;
}

Deno.test("recover() replays each <topic>.wal into a topic, sorted, and reports what it found", async () => {
  const dir = await dataDir(async (b) => {
    await b.publish("beta", bytes("b1"));
    await b.createGroup("alpha", "billing");
    await b.publish("alpha", bytes("a1"), { idempotencyKey: "k" });
    await b.publish("alpha", bytes("a2"));
    await b.consume("alpha", { autoAck: true }); // acks a1 in the default group only
  });
  const { o, opened, close } = options(dir);
  const { topics, report } = await recover(o);
  assertEquals(topics.map((t) => t.name), ["alpha", "beta"]);
  const [alpha, beta] = topics;
  assertEquals(
    opened.map((w) => w.name),
    ["alpha", "beta"],
  );
  assertEquals(opened[0]!.size, (await Deno.stat(`${dir}/alpha.wal`)).size);
  assertEquals([alpha!.messages.size, beta!.messages.size], [2, 1]);
  assertEquals([alpha!.defaultGroup.readyCount, alpha!.groups.get("billing")!.readyCount], [1, 2]);
  assertEquals(alpha!.keys.lookup("k", T0)?.id !== undefined, true);
  // META, GROUP, two PUBLISH and an ACK for alpha; META and PUBLISH for beta.
  assertEquals(report.topics, 2);
  assertEquals(report.messages, 3);
  assertEquals(report.records, 7);
  assertEquals(report.held_bytes, o.memory.held);
  assert(report.held_bytes >= 3 * heldSize(2), `${report.held_bytes}`);
  assert(alpha!.wal instanceof MemoryWal, "the topic writes through what openWal opened");
  close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("recover() skips invalid names and removes leftovers of interrupted rewrites", async () => {
  const dir = await dataDir((b) => b.publish("ok", bytes("x")));
  await Deno.writeFile(`${dir}/ok.wal.compact`, bytes("half a rewrite"));
  await Deno.writeFile(`${dir}/ok.wal.salvage`, bytes("half a salvage"));
  await Deno.writeFile(`${dir}/bad name.wal`, bytes("not ours"));
  await Deno.writeFile(`${dir}/notes.txt`, bytes("hello"));
  await Deno.mkdir(`${dir}/folder.wal`);
  const lines: string[] = [];
  const { o, close } = options(dir, { log: new Logger("warn", (l) => lines.push(l)) });
  const { topics, report } = await recover(o);
  assertEquals(topics.map((t) => t.name), ["ok"]);
  assertEquals(report.topics, 1);
  const left = [];
  for await (const e of Deno.readDir(dir)) left.push(e.name);
  assertEquals(left.sort(), [
    "bad name.wal",
    "ferry.lock",
    "folder.wal",
    "node_id",
    "notes.txt",
    "ok.wal",
    "webhook.key",
  ]);
  assertEquals(lines.length, 1);
  assertEquals(JSON.parse(lines[0]!).file, "bad name.wal");
  close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("recover() starts an empty or header-less file afresh", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  await Deno.writeFile(`${dir}/empty.wal`, new Uint8Array(0));
  await Deno.writeFile(`${dir}/short.wal`, bytes("FERRY"));
  const { o, opened, close } = options(dir);
  const { topics, report } = await recover(o);
  assertEquals(topics.map((t) => [t.name, t.messages.size]), [["empty", 0], ["short", 0]]);
  assertEquals(opened, [{ name: "empty", size: 0 }, { name: "short", size: 0 }]);
  assertEquals([report.messages, report.records], [0, 0]);
  const left = [];
  for await (const e of Deno.readDir(dir)) left.push(e.name);
  assertEquals(left, [], "removed before the writer opens a new file");
  close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("recover() leaves payloads of diskPayloadMin or more in the file, read back exact", async () => {
  const big = new Uint8Array(4096).map((_, i) => i % 251);
  const dir = await dataDir(async (b) => {
    await b.publish("t", big);
    await b.publish("t", bytes("small"));
  }, 1024);
  const { o, close } = options(dir, { diskPayloadMin: 1024 });
  const { topics, report } = await recover(o);
  const [onDisk, inMemory] = [...topics[0]!.messages.values()];
  assertEquals([onDisk!.onDisk, inMemory!.onDisk], [true, false]);
  assertEquals(onDisk!.readPayload(), big);
  assertEquals(report.held_bytes, MESSAGE_OVERHEAD_BYTES + heldSize(5), "no 4 KiB in memory");
  close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("normalise() copies a small payload out of the read buffer and shares equal headers", () => {
  const topic = memTopic();
  const readBuffer = bytes("....hello....");
  const a = publishRecord(topic, "a", readBuffer.subarray(4, 9), { headers: ["x-mq-k", "v"] });
  const b = publishRecord(topic, "b", bytes("x"), { headers: ["x-mq-k", "v"] });
  assertEquals(normalise(a, Infinity), undefined);
  normalise(b, Infinity);
  assertEquals(a.payload, bytes("hello"));
  assert(a.payload.buffer !== readBuffer.buffer, "copied: the read buffer is reused");
  readBuffer.fill(0);
  assertEquals(a.payload, bytes("hello"));
  assert(a.headers === b.headers, "one shared header list");
  const ack: WalRecord = { type: RecordType.Ack, seq: 1, group: "", ids: ["a"] };
  assertEquals(normalise(ack, 0), undefined);
});

Deno.test("normalise() points a payload of diskPayloadMin or more at where its frame ends", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  await Deno.writeFile(`${dir}/f`, new Uint8Array(100));
  const file = PayloadFile.open(`${dir}/f`);
  const topic = memTopic();
  const payload = new Uint8Array(20);
  const big = publishRecord(topic, "big", payload);
  assertEquals(normalise(big, 20, file, 90), { file, offset: 70 });
  assert(big.payload === payload, "left as it is: only its length is read");
  const small = publishRecord(topic, "small", new Uint8Array(19));
  assertEquals(normalise(small, 20, file, 90), undefined);
  assertEquals(normalise(publishRecord(topic, "none", new Uint8Array(20)), 20), undefined);
  file.close();
  await Deno.remove(dir, { recursive: true });
});
