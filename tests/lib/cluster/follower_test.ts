/**
 * A leader broker and follower brokers in one process, the stream passed by hand: what the
 * leader commits the followers hold, a snapshot replaces a follower's stale state, and a write
 * resolves only once the synchronous follower has it.
 */

import { assertEquals } from "../../_support/assert.ts";
import { Broker } from "../../../lib/broker.ts";
import { Replicator, type Session } from "../../../lib/cluster/replicator.ts";
import { ClusterState } from "../../../lib/cluster/state.ts";
import { defaultConfig } from "../../../lib/config.ts";
import { Logger } from "../../../lib/log.ts";
import { MemoryWal } from "../../../lib/storage/memory_wal.ts";
import type { Appended } from "../../../lib/storage/wal.ts";
import { frameSize, type WalRecord } from "../../../lib/storage/record.ts";
import { bytes, T0, texts } from "../_broker.ts";

const quiet = new Logger("error", () => {});
const config = defaultConfig({ dataDir: ":memory:" });

/** A broker that leads term 1 of a cluster of `size`, shipping through its replicator. */
async function leader(size = 3) {
  const replicator = new Replicator({
    needed: Math.floor(size / 2),
    log: quiet,
    sync: { setSync: () => Promise.resolve(true) },
  });
  const broker = await Broker.open(config, { clock: () => T0, tick: false, log: quiet });
  const state = new ClusterState("leader", "http://leader", quiet);
  broker.attachCluster(state, replicator);
  state.elected(1, performance.now() + 1e9);
  return { broker, replicator, state };
}

/** A follower broker connected to `r`: every message it is sent is applied, then acked. */
async function follower(r: Replicator, name: string) {
  const broker = await Broker.open(config, { clock: () => T0, tick: false, log: quiet });
  const f = broker.follower();
  // The ack comes after the follower's write is durable, so after `session` is set.
  const session: Session = r.attach(name, {
    send: (msg) => f.apply(msg, (index) => r.ack(session, index)),
    bufferedAmount: 0,
    close: () => {},
  });
  return broker;
}

Deno.test("Follower: the leader's publishes, acks, groups and deletions reach its followers", async () => {
  const l = await leader();
  const a = await follower(l.replicator, "a");
  const b = await follower(l.replicator, "b");
  const ids: string[] = [];
  for (const p of ["1", "2", "3"]) ids.push((await l.broker.publish("jobs", bytes(p))).id);
  await l.broker.createGroup("jobs", "billing");
  await l.broker.ack("jobs", "", [ids[0]!]);
  await l.broker.publish("gone", bytes("x"));
  await l.broker.deleteTopic("gone");
  await l.broker.publish("jobs", bytes("4"));
  await new Promise((r) => setTimeout(r, 0)); // b is not synchronous: give it its turn too
  for (const f of [a, b]) {
    assertEquals(texts(await f.consume("jobs", { limit: 10, peek: true })), ["2", "3", "4"]);
    assertEquals(f.findTopic("jobs")!.groups.has("billing"), true);
    assertEquals(f.findTopic("gone"), undefined);
  }
  for (const x of [a, b, l.broker]) await x.close();
  l.state.close();
});

Deno.test("Follower: a snapshot replaces what a follower held, stale topics included", async () => {
  const l = await leader();
  await follower(l.replicator, "a"); // the synchronous one
  for (const p of ["1", "2"]) await l.broker.publish("jobs", bytes(p));
  const stale = await Broker.open(config, { clock: () => T0, tick: false, log: quiet });
  await stale.publish("jobs", bytes("never acknowledged"));
  await stale.publish("orphan", bytes("only here"));
  const f = stale.follower();
  const s: Session = l.replicator.attach("late", {
    send: (msg) => f.apply(msg, (i) => l.replicator.ack(s, i)),
    bufferedAmount: 0,
    close: () => {},
  });
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(texts(await stale.consume("jobs", { limit: 10, peek: true })), ["1", "2"]);
  assertEquals(stale.findTopic("orphan"), undefined);
  await l.broker.publish("jobs", bytes("3"));
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(texts(await stale.consume("jobs", { limit: 10, peek: true })), ["1", "2", "3"]);
  await stale.close();
  await l.broker.close();
  l.state.close();
});

Deno.test("Follower: a write that fails ends its part: no ack, and the transport hears it", async () => {
  const l = await leader();
  let failing = false;
  class FlakyWal extends MemoryWal {
    override append(record: WalRecord): Appended {
      if (!failing) return super.append(record);
      return { durable: Promise.reject(new Error("disk full")), size: frameSize(record) };
    }
  }
  const broker = await Broker.open(config, {
    clock: () => T0,
    tick: false,
    log: quiet,
    openWal: () => new FlakyWal(),
  });
  const broken: string[] = [];
  const acks: number[] = [];
  const f = broker.follower((e) => broken.push(e.message));
  const session: Session = l.replicator.attach("a", {
    send: (msg) =>
      f.apply(msg, (index) => {
        acks.push(index);
        l.replicator.ack(session, index);
      }),
    bufferedAmount: 0,
    close: () => {},
  });
  await l.broker.publish("jobs", bytes("ok"));
  failing = true;
  const late = l.broker.publish("jobs", bytes("lost on the follower"));
  late.catch(() => {}); // it fails when the term ends below
  await new Promise((r) => setTimeout(r, 10));
  assertEquals(broken, ["disk full"]);
  assertEquals(acks.length, 2, "the snapshot and the first publish only");
  l.replicator.deactivate("test over");
  await broker.close();
  await l.broker.close();
  l.state.close();
});
