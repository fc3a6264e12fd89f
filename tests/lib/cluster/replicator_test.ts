/**
 * The leader's replicator over in-process links: quorum through recorded synchronous
 * followers, snapshots for newcomers, lag, and the end of a term.
 */

import { assert, assertEquals, assertRejects } from "../../_support/assert.ts";
import { type ReplicaLink, Replicator } from "../../../lib/cluster/replicator.ts";
import { decodeMessage, type Entry } from "../../../lib/cluster/replica_stream.ts";
import { Logger } from "../../../lib/log.ts";

/** A link that keeps what it is sent. */
function link() {
  const sent: Uint8Array[] = [];
  const l: ReplicaLink & { sent: Uint8Array[]; closed?: string } = {
    sent,
    send: (m) => void sent.push(m),
    bufferedAmount: 0,
    close(reason) {
      this.closed = reason;
    },
  };
  return l;
}

const frame = (n: number) => new Uint8Array([n]);
const record = (n: number): Entry => ({ kind: "record", topic: "t", frame: frame(n) });
const turn = () => new Promise((r) => setTimeout(r, 0));

function replicator(needed = 1) {
  let now = 0;
  const synced: string[][] = [];
  const r = new Replicator({
    needed,
    log: new Logger("error", () => {}),
    clock: () => now,
    sync: {
      setSync: (peers: string[]) => {
        synced.push(peers);
        return Promise.resolve(true);
      },
    },
  });
  return { r, synced, advance: (ms: number) => now += ms };
}

Deno.test("Replicator: a write resolves once the recorded synchronous follower has it", async () => {
  const { r, synced } = replicator();
  r.activate(() => [record(0)]);
  const a = link(), b = link();
  const sa = r.attach("a", a);
  const sb = r.attach("b", b);
  const first = decodeMessage(a.sent[0]!);
  assertEquals(first.entries.map((e) => e.kind), ["snapshot-begin", "record", "snapshot-end"]);
  assertEquals(first.index, 1, "a snapshot stands for index 1 of a fresh term");
  r.ack(sa, 1); // a has its snapshot: it is recorded as synchronous
  await turn();
  assertEquals(synced, [["a"]]);
  assertEquals(r.standbys, ["a"]);
  let done = false;
  const w = r.ship(record(1)).then(() => done = true);
  await turn();
  assertEquals(decodeMessage(a.sent[1]!).index, 2);
  assertEquals(decodeMessage(b.sent[1]!).index, 2, "every follower gets the stream");
  r.ack(sb, 2);
  await turn();
  assert(!done, "another follower's ack does not count");
  r.ack(sa, 2);
  await w;
  assertEquals([...r.lag()], [["a", 0], ["b", 0]]);
  r.deactivate("test over");
});

Deno.test("Replicator: when the synchronous follower goes, one that has every acked write replaces it", async () => {
  const { r, synced } = replicator();
  r.activate(() => []);
  const a = link(), b = link();
  const sa = r.attach("a", a);
  const sb = r.attach("b", b);
  r.ack(sa, 1);
  await turn();
  const w = r.ship(record(1));
  await turn();
  r.ack(sa, 2);
  await w;
  r.detach(sa, "gone");
  assertEquals(a.closed, "gone");
  let done = false;
  const w2 = r.ship(record(2)).then(() => done = true);
  await turn();
  r.ack(sb, 1); // b is behind what was acknowledged (2): not yet eligible
  await turn();
  assertEquals(synced, [["a"]]);
  r.ack(sb, 3);
  await w2;
  assert(done);
  assertEquals(synced, [["a"], ["b"]]);
  r.deactivate("test over");
});

Deno.test("Replicator: waits fail when the term ends or no quorum answers in time; lag in seconds", async () => {
  const { r, advance } = replicator();
  r.activate(() => []);
  const a = link();
  const sa = r.attach("a", a);
  r.ack(sa, 1);
  await turn();
  const late = r.ship(record(1));
  late.catch(() => {}); // checked below
  await turn();
  advance(2_500);
  assertEquals([...r.lagSeconds()], [["a", 2.5]]);
  advance(10_000);
  await new Promise((res) => setTimeout(res, 300)); // the expiry check runs every 250 ms
  await assertRejects(() => late, "unavailable");
  const cut = r.ship(record(2));
  cut.catch(() => {}); // checked below
  r.deactivate("this node no longer leads");
  await assertRejects(() => cut, "unavailable");
  assertEquals(a.closed, "this node no longer leads");
  assertEquals(await r.ship(record(3)), undefined, "not leading: nothing to wait for");
});
