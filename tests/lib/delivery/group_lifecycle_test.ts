import { assertEquals, assertRejects, assertThrows } from "../../_support/assert.ts";
import { createGroup, getGroup, listGroups } from "../../../lib/delivery/group_lifecycle.ts";
import { bytes, openBroker, T0, texts } from "../_broker.ts";

Deno.test("getGroup() creates a missing group once, with a GROUP record that survives a restart", async () => {
  const t = await openBroker({ dataDir: "temp" });
  const topic = t.broker.getTopic("orders");
  const g = getGroup(t.broker, topic, "billing");
  assertEquals(getGroup(t.broker, topic, "billing"), g, "the same group the second time");
  assertEquals([g.name, g.createdAt], ["billing", T0]);
  await topic.wal.barrier();
  await t.broker.close();
  const again = await openBroker({ dataDir: t.dir });
  assertEquals([...again.broker.findTopic("orders")!.groups.keys()], ["", "billing"]);
  await again.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("createGroup() refuses a group that exists and a bad name", async () => {
  const t = await openBroker();
  await createGroup(t.broker, "orders", "billing");
  await assertRejects(() => createGroup(t.broker, "orders", "billing"), "already_exists");
  await assertRejects(() => createGroup(t.broker, "orders", "no/slash"), "invalid_name");
  await t.close();
});

Deno.test("createGroup() gets only what is published after it", async () => {
  const t = await openBroker();
  await t.broker.publish("orders", bytes("before"));
  await createGroup(t.broker, "orders", "billing");
  await t.broker.publish("orders", bytes("after"));
  assertEquals(texts(await t.broker.consume("orders", { group: "billing", limit: 10 })), ["after"]);
  assertEquals(texts(await t.broker.consume("orders", { limit: 10 })), ["before", "after"]);
  await t.close();
});

Deno.test("listGroups() names the named groups only, and 404s for a missing topic", async () => {
  const t = await openBroker();
  await createGroup(t.broker, "orders", "billing");
  await createGroup(t.broker, "orders", "audit");
  assertEquals(listGroups(t.broker, "orders").map((g) => g.name), ["billing", "audit"]);
  assertThrows(() => listGroups(t.broker, "missing"), "not_found");
  await t.close();
});
