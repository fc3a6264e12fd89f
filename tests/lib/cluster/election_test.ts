/**
 * Leader election on a real etcd with three real broker processes on loopback: one leader per
 * term, terms that only grow, followers that redirect writes, 503 `electing` while nobody
 * leads, a paused leader that must not acknowledge a write once its lease has run out, and
 * followers that hold the leader's data: they catch up after a restart, and a new leader has it.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { type ChildBroker, start, stop } from "../../_support/child.ts";
import { type EtcdServer, startEtcd } from "../../_support/etcd.ts";

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
async function startNodes(
  etcd: EtcdServer,
  name: string,
  env: Record<string, string> = {},
): Promise<ChildBroker[]> {
  const nodes: ChildBroker[] = [];
  for (let i = 0; i < 3; i++) nodes.push(await startNode(etcd, name, undefined, env));
  return nodes;
}

async function startNode(
  etcd: EtcdServer,
  name: string,
  dataDir?: string,
  env: Record<string, string> = {},
): Promise<ChildBroker> {
  return start(dataDir ?? await Deno.makeTempDir({ prefix: "ferry-node-" }), {
    BROKER_CLUSTER_ETCD: etcd.endpoint,
    BROKER_CLUSTER_NAME: name,
    BROKER_ELECTION_TTL: "2s",
    ...env,
  });
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
    for (const path of ["/api/stats", "/dashboard"]) {
      const own = await fetch(`${f.url}${path}`, { redirect: "manual" });
      assertEquals(own.status, 200, `a follower serves ${path} itself`);
      await own.body?.cancel();
    }

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

Deno.test("while etcd is down every node answers 503 electing; back, they elect again, data intact", async () => {
  let etcd = await startEtcd();
  const nodes = await startNodes(etcd, "etcd-down");
  try {
    const first = await settled(nodes);
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${first.url}/publish/jobs`, { method: "POST", body: `m${i}` });
      assertEquals(res.status, 201);
      await res.body?.cancel();
    }
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
    await holds(leader, "jobs", 5);
  } finally {
    await cleanUp(nodes, etcd);
  }
});

/** The depth of `topic` on `node` per its /api/stats: 0 without the topic, -1 while electing. */
async function depth(node: ChildBroker, topic: string): Promise<number> {
  const res = await fetch(`${node.url}/api/stats`);
  const stats = await res.json();
  return res.ok ? stats.topics[topic]?.depth ?? 0 : -1;
}

/** Polls until `node` holds `n` messages of `topic` (replication is asynchronous to reads). */
async function holds(node: ChildBroker, topic: string, n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await depth(node, topic) === n) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${node.url} holds ${await depth(node, topic)} of ${topic}, not ${n}`);
}

Deno.test("a restarted follower catches up; its stream and stats come from its own copy", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "catch-up");
  try {
    const leader = await settled(nodes);
    const [f1, f2] = nodes.filter((n) => n !== leader) as [ChildBroker, ChildBroker];
    const publish = async (body: string) => {
      const res = await fetch(`${leader.url}/publish/jobs`, { method: "POST", body });
      assertEquals(res.status, 201, await res.text());
    };
    for (let i = 0; i < 5; i++) await publish(`a${i}`);
    await holds(f1, "jobs", 5);
    await stop(f1, "SIGKILL");
    for (let i = 0; i < 5; i++) await publish(`b${i}`); // the other follower makes the quorum
    const consumed = await (await fetch(`${leader.url}/consume/jobs?limit=2&auto_ack=true`)).json();
    assertEquals(consumed.map((m: { payload_text: string }) => m.payload_text), ["a0", "a1"]);
    const back = await startNode(etcd, "catch-up", f1.dataDir);
    nodes[nodes.indexOf(f1)] = back;
    await holds(back, "jobs", 8);
    await holds(f2, "jobs", 8);
    // A follower's SSE stream serves its replicated copy, live.
    const ac = new AbortController();
    const sse = await fetch(`${f2.url}/stream/jobs`, { signal: ac.signal });
    assertEquals(sse.status, 200);
    const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
    await publish("live");
    let text = "";
    while (!text.includes('"payload_text":"live"')) text += (await reader.read()).value ?? "";
    ac.abort();
    await reader.cancel().catch(() => {});
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("a new leader holds every acknowledged write, and acks made before the kill stay made", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "handover");
  try {
    const leader = await settled(nodes);
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${leader.url}/publish/jobs`, { method: "POST", body: `m${i}` });
      assertEquals(res.status, 201);
      await res.body?.cancel();
    }
    const taken = await (await fetch(`${leader.url}/consume/jobs?limit=3&auto_ack=true`)).json();
    assertEquals(taken.length, 3);
    await stop(leader, "SIGKILL");
    const next = await settled(nodes.filter((n) => n !== leader));
    const rest = await (await fetch(`${next.url}/consume/jobs?limit=100&auto_ack=true`)).json();
    assertEquals(rest.map((m: { payload_text: string }) => m.payload_text), [
      "m3",
      "m4",
      "m5",
      "m6",
      "m7",
      "m8",
      "m9",
    ]);
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("only a synchronous follower may lead next; the leader replaces one that dies", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "sync");
  try {
    const leader = await settled(nodes);
    const publish = async (body: string) => {
      const res = await fetch(`${leader.url}/publish/jobs`, { method: "POST", body });
      assertEquals(res.status, 201, await res.text());
    };
    await publish("first");
    const syncOf = async (): Promise<string[]> =>
      // deno-lint-ignore no-explicit-any
      (await status(leader)).peers.filter((p: any) => p.synchronous).map((p: any) => p.address);
    // The peer list comes from etcd with each lease renewal: wait until it names the follower.
    let synced = await syncOf();
    for (let i = 0; i < 100 && synced.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      synced = await syncOf();
    }
    const [syncUrl] = synced;
    const s = nodes.find((n) => n.url === syncUrl)!;
    const f = nodes.find((n) => n !== leader && n !== s)!;
    await stop(s, "SIGKILL");
    await publish("second"); // waits until the other follower is recorded as synchronous
    for (let i = 0; i < 100 && (await syncOf())[0] !== f.url; i++) {
      await new Promise((r) => setTimeout(r, 50)); // the status is read, not waited on
    }
    assertEquals(await syncOf(), [f.url]);
    const back = await startNode(etcd, "sync", s.dataDir); // up to date, but not synchronous
    nodes[nodes.indexOf(s)] = back;
    await holds(back, "jobs", 2);
    await stop(leader, "SIGKILL");
    const next = await settled(nodes.filter((n) => n !== leader));
    assertEquals(next.url, f.url, "the synchronous follower leads");
    await holds(next, "jobs", 2);
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("with API keys on, followers replicate with the admin key", async () => {
  const etcd = await startEtcd();
  const keys = { BROKER_API_KEYS: "pub-1:publish,admin-1:admin" };
  const nodes = await startNodes(etcd, "keys", keys);
  try {
    const leader = await settled(nodes);
    const res = await fetch(`${leader.url}/publish/jobs`, {
      method: "POST",
      body: "x",
      headers: { authorization: "Bearer pub-1" },
    });
    assertEquals(res.status, 201, "answered only once a follower, authenticated, has it");
    await res.body?.cancel();
    for (const n of nodes) {
      let depth = 0;
      for (let i = 0; i < 100 && depth !== 1; i++) {
        if (i) await new Promise((r) => setTimeout(r, 25)); // the other follower may lag a little
        const stats = await fetch(`${n.url}/api/stats`, { headers: { "x-api-key": "admin-1" } });
        depth = (await stats.json()).topics?.jobs?.depth ?? 0;
      }
      assertEquals(depth, 1, n.url);
    }
  } finally {
    await cleanUp(nodes, etcd);
  }
});

Deno.test("nodes of two workers: every shard streams to its follower's same shard; a new leader has all", async () => {
  const etcd = await startEtcd();
  const nodes = await startNodes(etcd, "workers", { BROKER_WORKERS: "2" });
  try {
    const leader = await settled(nodes);
    const topics = ["t0", "t1", "t2", "t3", "t4", "t5"]; // both workers own some
    for (const t of topics) {
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${leader.url}/publish/${t}`, {
          method: "POST",
          body: `${t}.${i}`,
        });
        assertEquals(res.status, 201, "acknowledged: a synchronous follower has it in every shard");
        await res.body?.cancel();
      }
    }
    // Peers are read from etcd with each lease renewal (a third of the TTL): wait for both.
    let s = await status(leader);
    for (let i = 0; i < 100 && s.peers.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 50));
      s = await status(leader);
    }
    const synchronous = s.peers.filter((p: { synchronous: boolean }) => p.synchronous);
    assertEquals(synchronous.length, 1, JSON.stringify(s));
    const refused = await fetch(`${leader.url}/cluster/replicate?node=x&term=${s.term}&shards=1`);
    assertEquals(refused.status, 400, "a node of another worker count cannot follow");
    assert((await refused.json()).detail.includes("BROKER_WORKERS"));

    await stop(leader, "SIGKILL");
    const next = await settled(nodes.filter((n) => n !== leader));
    for (const t of topics) {
      const got = await (await fetch(`${next.url}/consume/${t}?limit=10&auto_ack=true`)).json();
      assertEquals(got.map((m: { payload_text: string }) => m.payload_text), [
        `${t}.0`,
        `${t}.1`,
        `${t}.2`,
      ]);
    }
  } finally {
    await cleanUp(nodes, etcd);
  }
});
