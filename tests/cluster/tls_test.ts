/**
 * A three-node cluster with TLS everywhere, real processes and a real etcd: every node serves
 * HTTPS, followers replicate from the leader over WSS trusting BROKER_CLUSTER_CA, and the nodes
 * reach etcd over TLS presenting a client certificate (etcd's --client-cert-auth). A publish
 * answered 201 was replicated; the next leader has it.
 */

import { assertEquals } from "../_support/assert.ts";
import { type ChildBroker, start, stop } from "../_support/child.ts";
import { startEtcd } from "../_support/etcd.ts";
import { makePki, trusting } from "../_support/tls.ts";

Deno.test("cluster over TLS: HTTPS nodes, WSS replication, etcd with client certificates", async () => {
  const pki = await makePki();
  const etcd = await startEtcd(undefined, pki);
  const client = trusting(pki);
  const nodes: ChildBroker[] = [];
  const https = (n: ChildBroker) => n.url.replace("http:", "https:");
  const health = async (n: ChildBroker) => {
    try {
      return await (await fetch(`${https(n)}/healthz`, { client })).json();
    } catch {
      return {};
    }
  };
  /** The one node all of `among` agree leads (each answers 200), polled: no event to wait on. */
  const settled = async (among: ChildBroker[]) => {
    for (let i = 0; i < 300; i++) {
      const hs = await Promise.all(among.map(health));
      const leaders = among.filter((_, j) => hs[j].cluster_role === "leader");
      if (hs.every((h) => h.status === "ok") && leaders.length === 1) return leaders[0]!;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no leader: ${JSON.stringify(await Promise.all(among.map(health)))}`);
  };
  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await start(await Deno.makeTempDir({ prefix: "ferry-tls-node-" }), {
          BROKER_CLUSTER_ETCD: etcd.endpoint,
          BROKER_CLUSTER_NAME: "tls",
          BROKER_ELECTION_TTL: "2s",
          BROKER_TLS_CERT: pki.certFile,
          BROKER_TLS_KEY: pki.keyFile,
          BROKER_CLUSTER_CA: pki.caFile,
          BROKER_ETCD_CA: pki.caFile,
          BROKER_ETCD_CERT: pki.clientCertFile,
          BROKER_ETCD_KEY: pki.clientKeyFile,
        }),
      );
    }
    const leader = await settled(nodes);
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${https(leader)}/publish/secure`, {
        method: "POST",
        body: `m${i}`,
        client,
      });
      assertEquals(res.status, 201, `a quorum confirmed it over wss: ${await res.text()}`);
    }
    await stop(leader, "SIGKILL");
    const next = await settled(nodes.filter((n) => n !== leader));
    const got = await (await fetch(`${https(next)}/consume/secure?limit=10&auto_ack=true`, {
      client,
    })).json();
    assertEquals(got.map((m: { payload_text: string }) => m.payload_text), [
      "m0",
      "m1",
      "m2",
      "m3",
      "m4",
    ]);
  } finally {
    for (const n of nodes) {
      await stop(n);
      await Deno.remove(n.dataDir, { recursive: true }).catch(() => {});
    }
    client.close();
    await etcd.stop();
    await pki.remove();
  }
});
