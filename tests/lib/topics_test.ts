import { assert, assertEquals, assertThrows } from "../_support/assert.ts";
import { defaultConfig } from "../../lib/config.ts";
import { silentLogger } from "../../lib/log.ts";
import { MemoryBudget } from "../../lib/memory/budget.ts";
import { Registry } from "../../lib/topics.ts";
import { defaultOpenWal } from "../../lib/storage/open_wal.ts";
import { RecordType } from "../../lib/storage/record.ts";
import { replayFile } from "../../lib/storage/replay.ts";
import { T0 } from "./_broker.ts";

function registry(dataDir = ":memory:", maxTopics = 1000) {
  const config = defaultConfig({ dataDir, maxTopics });
  return new Registry(
    config,
    new MemoryBudget(Infinity),
    () => T0,
    defaultOpenWal(config, silentLogger),
  );
}

Deno.test("Registry.get() creates a topic once; find() never creates", () => {
  const r = registry();
  assertEquals(r.find("orders"), undefined);
  const t = r.get("orders");
  assertEquals(r.get("orders"), t);
  assertEquals(r.find("orders"), t);
  assertEquals([t.settings.policy, t.settings.createdAt], ["reject", T0]);
  assertThrows(() => r.get("bad/name"), "invalid_name");
});

Deno.test("Registry.create() counts toward BROKER_MAX_TOPICS, a topic's .dlq aside", () => {
  const r = registry(":memory:", 2);
  r.create("a", {});
  r.create("b", {});
  assertThrows(() => r.create("c", {}), "topic_limit_reached");
  r.create("a.dlq", {}); // its topic exists: dead-lettering must always be able to create it
  assertThrows(() => r.create("z.dlq", {}), "topic_limit_reached");
  assertEquals([...r.values()].map((t) => t.name), ["a", "b", "a.dlq"]);
});

Deno.test("Registry.create() writes the settings as a META record in the topic's file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-registry-" });
  const r = registry(dir);
  const t = r.create("orders", { policy: "drop-oldest", maxMessages: 5 });
  await t.wal.barrier();
  const seen: unknown[] = [];
  await replayFile(`${dir}/orders.wal`, (rec) => {
    if (rec.type === RecordType.Meta) seen.push([rec.policy, rec.maxMessages, rec.createdAt]);
  }, silentLogger);
  assertEquals(seen, [["drop-oldest", 5, T0]]);
  await r.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("Registry.delete() removes the file; a topic of the same name waits for it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-registry-" });
  const r = registry(dir);
  const old = r.create("orders", {});
  await old.wal.barrier();
  const gone = r.delete(old);
  assertEquals(r.find("orders"), undefined);
  const fresh = r.create("orders", {}); // its first write waits until the old file is removed
  await gone;
  await fresh.wal.barrier();
  const stat = await Deno.stat(`${dir}/orders.wal`);
  assert(stat.size > 0, "the new topic's file exists, with its META");
  let metas = 0;
  await replayFile(`${dir}/orders.wal`, (rec) => {
    if (rec.type === RecordType.Meta) metas++;
  }, silentLogger);
  assertEquals(metas, 1, "one META: the old file's records are gone");
  await r.close();
  await Deno.remove(dir, { recursive: true });
});
