import { assert, assertEquals, assertRejects } from "../../_support/assert.ts";
import { Broker } from "../../../lib/broker.ts";
import { defaultConfig } from "../../../lib/config.ts";
import { DataDirInUseError, DataDirLock, LOCK_FILE } from "../../../lib/storage/data_dir_lock.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("DataDirLock.acquire() creates the dir, writes its pid, and refuses a second holder", async () => {
  const parent = await Deno.makeTempDir({ prefix: "ferry-lock-" });
  const dir = `${parent}/not/yet`;
  const lock = await DataDirLock.acquire(dir);
  assertEquals(await Deno.readTextFile(`${dir}/${LOCK_FILE}`), `${Deno.pid}\n`);
  const e = await assertRejects(() => DataDirLock.acquire(dir));
  assert(e instanceof DataDirInUseError, String(e));
  assertEquals([e.dir, e.pid], [await Deno.realPath(dir), Deno.pid]);
  assert(e.message.includes(`"${e.dir}" is in use by another broker (pid ${Deno.pid})`));
  await lock.release();
  assertEquals(await Deno.readTextFile(`${dir}/${LOCK_FILE}`), "", "a released lock names no pid");
  const again = await DataDirLock.acquire(dir);
  await again.release();
  await again.release();
  await Deno.remove(parent, { recursive: true });
});

Deno.test("Broker.open() refuses a data dir an open broker holds, before reading its WALs", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-lock-" });
  const config = defaultConfig({ dataDir: dir });
  const first = await Broker.open(config, { clock: () => 0 });
  await first.publish("t", bytes("kept"));
  const wal = await Deno.readFile(`${dir}/t.wal`);
  const refused = await assertRejects(() => Broker.open(config, { clock: () => 0 }));
  assert(refused instanceof DataDirInUseError, String(refused));
  assertEquals(await Deno.readFile(`${dir}/t.wal`), wal);
  assertEquals((await first.publish("t", bytes("after"))).deduplicated, false);
  await first.close();

  const reopened = await Broker.open(config, { clock: () => 0 });
  assertEquals(reopened.findTopic("t")?.messages.size, 2);
  await reopened.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("Broker.open() with :memory: takes no lock: two run side by side", async () => {
  const config = defaultConfig({ dataDir: ":memory:" });
  const a = await Broker.open(config, { clock: () => 0 });
  const b = await Broker.open(config, { clock: () => 0 });
  await a.close();
  await b.close();
});
