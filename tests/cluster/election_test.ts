/**
 * Leader election on a real etcd with three real broker processes on loopback: one leader per
 * term, terms that only grow, followers that redirect writes, 503 `electing` while nobody
 * leads, and a paused leader that must not acknowledge a write once its lease has run out.
 * (Replication of the data is not part of these tests yet.)
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { type ChildBroker, start, stop } from "../_support/child.ts";
import { type EtcdServer, startEtcd } from "../_support/etcd.ts";

interface Health {
  status: string;
  cluster_role?: string;
  cluster_term?: number;
}

async function health(node: ChildBroker): Promise<Health> {
  const res = await fetch(`${node.url}/healthz`);
  return await res.json();
}

// deno-lint-ignore no-explicit-any
async function status(node: ChildBroker): Promise<any> {
  return await (await fetch(`${node.url}/api/cluster/status`)).json();
}

/** Three nodes of one cluster on `etcd`, each with its own data dir. */
async function startNodes(etcd: EtcdServer, name: string, n = 3): Promise<ChildBroker[]> {
  const nodes: ChildBroker[] = [];
  for (let i = 0; i < n; i++) nodes.push(await startNode(etcd, name));
  return nodes;
}

function startNode(etcd: EtcdServer, name: string, dataDir?: string): Promise<ChildBroker> {
  return (async () =>
    start(dataDir ?? await Deno.makeTempDir({ prefix: "ferry-node-" }), {
      BROKER_CLUSTER_ETCD: etcd.endpoint,
      BROKER_CLUSTER_NAME: name,
      BROKER_ELECTION_TTL: "2s",
    }))();
}

/** Resolves once `nodes` agree on one leader (each answers /healthz 200); that leader. */
async function settled(nodes: ChildBroker[], timeoutMs = 15_000): Promise<ChildBroker> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    const hs = await Promise.all(nodes.map(health));
    const leaders = nodes.filter((_, i) => hs[i]!.cluster_role === "leader");
    const terms = new Set(hs.map((h) => h.cluster_term));
    if (hs.every((h) => h.status === "ok") && leaders.length === 1 && terms.size === 1) {
      return leaders[0]!;
    }
    await new Promise((r) => setTimeout(r, 50)); // polling a remote state: no event to wait on
  }
  throw new Error(`no settled leader: ${JSON.stringify(await Promise.all(nodes.map(health)))}`);
}

async function cleanUp(nodes: ChildBroker[], etcd: EtcdServer) {
  for (const n of nodes) {
    await stop(n);
    await Deno.remove(n.dataDir, { recursive: true }).catch(() => {});
  }
  await etcd.stop();
}

Deno.test("three nodes elect one leader; followers redirect writes and serve their own reads", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "elect");
  try {
    const leader = await settled(nodes);
    const followers = nodes.filter((n) => n !== leader);
    const h = await health(leader);
    assertEquals([h.cluster_role, h.cluster_term], ["leader", 1]);

    const f = followers[0]!;
    const redirect = await fetch(`${f.url}/publish/orders?ttl=1m`, {
      method: "POST",
      body: "hello",
      redirect: "manual",
    });
    await redirect.body?.cancel();
    assertEquals(redirect.status, 307);
    assertEquals(redirect.headers.get("location"), `${leader.url}/publish/orders?ttl=1m`);
    const followed = await fetch(`${f.url}/publish/orders`, { method: "POST", body: "hello" });
    assertEquals(followed.status, 201, await followed.text());
    const stats = await fetch(`${f.url}/api/stats`, { redirect: "manual" });
    assertEquals(stats.status, 200, "a follower serves /api/stats itself");
    await stats.body?.cancel();

    for (const n of nodes) {
      // Peers are read from etcd with each lease renewal (a third of the TTL): wait for both.
      let s = await status(n);
      for (let i = 0; i < 100 && s.peers.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        s = await status(n);
      }
      assertEquals([s.mode, s.term, s.leader], ["cluster", 1, leader.url]);
      assertEquals(s.role, n === leader ? "leader" : "follower");
      assertEquals(s.peers.length, 2, JSON.stringify(s));
      for (const p of s.peers) {
        assert(p.healthy, JSON.stringify(p));
        assertEquals(p.role, p.address === leader.url ? "leader" : "follower");
      }
    }
    const metrics = await (await fetch(`${leader.url}/metrics`)).text();
    assert(metrics.includes('ferry_cluster_role{role="leader"} 1'), metrics);
    assert(metrics.includes("ferry_cluster_term 1"), metrics);
    assert(metrics.includes("ferry_elections_total 1"), metrics);
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("a killed leader is replaced in a higher term; back, it follows", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "failover");
  try {
    const leader = await settled(nodes);
    const rest = nodes.filter((n) => n !== leader);
    const t0 = performance.now();
    await stop(leader, "SIGKILL");
    const next = await settled(rest);
    console.log(`failover after SIGKILL: ${Math.round(performance.now() - t0)} ms`);
    assertEquals((await health(next)).cluster_term, 2);
    const back = await startNode(etcd, "failover", leader.dataDir);
    nodes[nodes.indexOf(leader)] = back;
    assertEquals(await settled(nodes), next, "the returning node follows");
    assertEquals((await health(back)).cluster_role, "follower");
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("a paused leader acknowledges no write after its lease ran out, then follows", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "pause");
  try {
    const leader = await settled(nodes);
    const rest = nodes.filter((n) => n !== leader);
    leader.kill("SIGSTOP");
    let next: ChildBroker;
    try {
      next = await settled(rest);
    } finally {
      leader.kill("SIGCONT");
    }
    // The first thing the old leader does when it runs again must not be a 2xx to a write.
    const res = await fetch(`${leader.url}/publish/orders`, {
      method: "POST",
      body: "late",
      redirect: "manual",
    });
    await res.body?.cancel();
    assert(res.status === 503 || res.status === 307, `old leader answered ${res.status}`);
    assertEquals(await settled(nodes), next);
    assertEquals((await health(leader)).cluster_role, "follower");
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("while etcd is down every node answers 503 electing; back, they elect again", async () => {
  let etcd = await startEtcd();
  const nodes = await startNodes(etcd, "etcd-down");
  try {
    await settled(nodes);
    await etcd.stop({ keepData: true });
    const until = performance.now() + 15_000;
    let hs: Health[] = [];
    while (performance.now() < until) {
      hs = await Promise.all(nodes.map(health));
      if (hs.every((h) => h.status === "electing")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert(hs.every((h) => h.status === "electing"), JSON.stringify(hs));
    const res = await fetch(`${nodes[0]!.url}/publish/orders`, { method: "POST", body: "x" });
    assertEquals(res.status, 503);
    assertEquals(res.headers.get("retry-after"), "1");
    assertEquals((await res.json()).code, "electing");
    etcd = await startEtcd(etcd);
    const leader = await settled(nodes);
    assert((await health(leader)).cluster_term! >= 2, "a new election raised the term");
  } finally {
    await cleanUp(nodes, etcd);
  }
});
