/**
 * The node's choice of synchronous followers over several shards: a follower is named only when
 * ready in every shard, a follower gone from one shard counts in none, and a new term starts over.
 */

import { assertEquals } from "../../_support/assert.ts";
import { type Readiness, SyncChooser } from "../../../lib/cluster/sync.ts";

/** A chooser over `shards` shards whose recordings succeed unless `refuse` is set. */
function chooser(shards = 2, needed = 1) {
  const recorded: string[][] = [];
  /** What each shard was last told: [peers, generation, term]. */
  const applied: [string[], number, number][] = [];
  const state = { refuse: false };
  const c = new SyncChooser({
    shards,
    needed,
    retryMs: 1,
    setSync: (peers) => {
      if (state.refuse) return Promise.resolve(false);
      recorded.push(peers);
      return Promise.resolve(true);
    },
    apply: (shard, peers, generation, term) => applied[shard] = [[...peers], generation, term],
  });
  /** Shard `i` reports `peers` at whatever it was last told. */
  const report = (i: number, peers: Readiness["peers"], term = 1) =>
    c.report(i, { term, generation: applied[i]?.[1] ?? -1, peers });
  return { c, recorded, applied, report, state };
}

const turn = () => new Promise((r) => setTimeout(r, 0));

Deno.test("SyncChooser: a follower ready in one shard only is not named; ready in both, it is", async () => {
  const { c, recorded, applied, report } = chooser();
  report(0, [["b", true]]);
  report(1, [["b", false]]);
  report(0, [["b", true]]);
  await turn();
  assertEquals(recorded, [], "b lacks shard 1's acknowledged writes");
  report(1, [["b", true]]);
  await turn();
  assertEquals(recorded, [["b"]]);
  assertEquals(c.standbys, ["b"]);
  assertEquals(applied.map(([peers]) => peers), [["b"], ["b"]], "every shard counts b");
});

Deno.test("SyncChooser: a follower gone from one shard counts in none until another is named", async () => {
  const { c, recorded, applied, report } = chooser();
  report(0, [["b", true], ["c", true]]);
  report(1, [["b", true], ["c", false]]);
  report(0, [["b", true], ["c", true]]);
  report(1, [["b", true], ["c", false]]);
  await turn();
  assertEquals(recorded, [["b"]]);
  report(0, [["b", true], ["c", true]]);
  report(1, [["b", true], ["c", false]]);
  report(1, [["c", false]]); // b's connection to shard 1 ended
  assertEquals(applied.map(([peers]) => peers), [[], []], "shard 0 stops counting b too");
  report(0, [["b", true], ["c", true]]);
  report(1, [["c", false]]);
  await turn();
  assertEquals(recorded, [["b"]], "c is not ready in shard 1 yet");
  report(1, [["c", true]]);
  await turn();
  assertEquals(recorded, [["b"], ["c"]]);
  assertEquals(c.standbys, ["c"]);
});

Deno.test("SyncChooser: a failed recording is tried again; a new term starts over; old reports are ignored", async () => {
  const { c, recorded, applied, report, state } = chooser(1);
  state.refuse = true;
  report(0, [["b", true]]);
  report(0, [["b", true]]);
  await new Promise((r) => setTimeout(r, 5));
  assertEquals(recorded, []);
  state.refuse = false;
  await new Promise((r) => setTimeout(r, 5));
  assertEquals(recorded, [["b"]], "tried again");
  report(0, [["b", true]], 2);
  assertEquals(c.standbys, [], "term 2 names nobody yet");
  assertEquals(applied[0]![2], 2);
  report(0, [["b", true]], 1);
  assertEquals(applied[0]![2], 2, "a report of term 1 changes nothing");
  c.close();
});

Deno.test("SyncChooser: with no follower needed, a new term records an empty set at once", () => {
  const { recorded, report } = chooser(2, 0);
  report(0, []);
  assertEquals(recorded, [[]]);
});
