/**
 * Two elections on a real etcd in this process, with the broker's health stubbed: a node that
 * cannot write its WAL does not campaign, and a leader that loses it resigns at once.
 */

import { assertEquals } from "../../_support/assert.ts";
import { startEtcd } from "../../_support/etcd.ts";
import { Election } from "../../../lib/cluster/election.ts";
import { Etcd } from "../../../net/etcd.ts";
import { ClusterState } from "../../../lib/cluster/state.ts";
import { Logger } from "../../../lib/log.ts";

const quiet = new Logger("error", () => {});

function node(endpoint: string, id: string, healthy: { ok: boolean }) {
  const state = new ClusterState(id, `http://${id}`, quiet);
  const election = new Election({
    etcd: new Etcd([endpoint], 1_000),
    name: "health",
    ttlSeconds: 2,
    state,
    log: quiet,
    healthy: () => healthy.ok,
  });
  return { state, election };
}

/**
 * Resolves once `state.role` is `role` (it changes on etcd events, not on a schedule); fails
 * after 10 s, five lease lifetimes.
 */
function becomes(state: ClusterState, role: string): Promise<void> {
  if (state.role === role) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`${state.id} did not become ${role}; it is ${state.role}`));
    }, 10_000);
    const off = state.onChange((s) => {
      if (s.role !== role) return;
      off();
      clearTimeout(timer);
      resolve();
    });
  });
}

Deno.test("a node that cannot write does not campaign; a leader that stops being able to resigns", async () => {
  const etcd = await startEtcd();
  const aHealth = { ok: false }, bHealth = { ok: true };
  const a = node(etcd.endpoint, "a", aHealth);
  const b = node(etcd.endpoint, "b", bHealth);
  try {
    a.election.start();
    b.election.start();
    await becomes(b.state, "leader");
    await becomes(a.state, "follower");
    aHealth.ok = true;
    bHealth.ok = false; // b's WAL fails: within a renewal it resigns and a takes over
    await becomes(a.state, "leader");
    assertEquals(a.state.term, 2);
    await becomes(b.state, "follower");
  } finally {
    await a.election.close();
    await b.election.close();
    await etcd.stop();
  }
});
