import { assert, assertEquals } from "../../_support/assert.ts";
import { ClusterState } from "../../../lib/cluster/state.ts";
import { Logger } from "../../../lib/log.ts";

function node(lines: string[] = []) {
  let now = 1_000;
  const s = new ClusterState(
    "me",
    "http://me:7800",
    new Logger("info", (l) => lines.push(l)),
    () => now,
  );
  return { s, set: (t: number) => now = t };
}

Deno.test("ClusterState: a leader is writable only while its lease holds", () => {
  const { s, set } = node();
  assertEquals(s.route(), { kind: "electing" });
  s.elected(4, 3_000);
  assertEquals([s.role, s.term, s.elections, s.writable], ["leader", 4, 1, true]);
  set(2_999);
  assertEquals(s.route(), { kind: "here" });
  set(3_000);
  assert(!s.writable, "not one millisecond past the lease");
  assertEquals(s.route(), { kind: "electing" });
  s.renewed(5_000);
  assert(s.writable);
  s.close();
});

Deno.test("ClusterState: following a leader, never an older term; losing it elects", () => {
  const lines: string[] = [];
  const { s } = node(lines);
  s.follow({ id: "b", url: "http://b:7800", term: 2 });
  assertEquals(s.route(), { kind: "leader", url: "http://b:7800" });
  s.follow({ id: "c", url: "http://c:7800", term: 1 });
  assertEquals(s.leader?.id, "b", "a record of an older term is ignored");
  s.elected(3, 10_000);
  s.follow({ id: "c", url: "http://c:7800", term: 4 });
  assertEquals([s.role, s.term, s.writable], ["follower", 4, false], "another leader: step down");
  s.follow(undefined);
  assertEquals([s.role, s.term], ["candidate", 4], "the term never goes down");
  const msgs = lines.map((l) => JSON.parse(l).msg);
  assertEquals(msgs, [
    "cluster: following",
    "cluster: elected leader",
    "cluster: stopped leading",
    "cluster: following",
    "cluster: no leader; electing",
  ]);
  s.close();
});

Deno.test("ClusterState: a peer's role comes from who leads now", () => {
  const { s } = node();
  const peer = { id: "b", url: "http://b:7800", healthy: true, lastSeen: 0 };
  s.setPeers([peer]);
  assertEquals(s.roleOf(peer), "follower");
  s.follow({ id: "b", url: "http://b:7800", term: 1 });
  assertEquals(s.roleOf(peer), "leader");
  assertEquals(s.roleOf({ ...peer, id: "c", healthy: false }), "candidate");
  s.close();
});
