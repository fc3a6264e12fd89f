/**
 * The cluster chaos loop: three broker processes on a real etcd, publishers and an acking
 * consumer running against whoever leads, and the leader SIGKILLed again and again (each time
 * restarted as a follower before the next kill). A ledger keeps what the cluster answered:
 * after the last kill every publish answered 2xx must be held exactly once unless its ack was
 * answered 2xx, nothing acked may come back, and nothing never published may appear.
 * Used by tests/cluster/chaos_test.ts (a short loop) and `deno task chaos` (a long one).
 */

import { type ChildBroker, start, stop } from "../_support/child.ts";
import { type EtcdServer, startEtcd } from "../_support/etcd.ts";

const TOPIC = "chaos";
const PUBLISHERS = 4;

/** What the cluster answered. */
interface Ledger {
  /** Payload → id of each publish answered 201. */
  published: Map<string, string>;
  /** Payloads whose publish got no answer (it may or may not have landed). */
  unknownPublish: Set<string>;
  /** Ids whose ack was answered 200 with the id acked. */
  acked: Set<string>;
  /** Ids whose ack got no answer. */
  unknownAck: Set<string>;
}

export interface ChaosResult {
  /** ms from each SIGKILL to the first 2xx publish on the new leader. */
  failovers: number[];
  published: number;
  acked: number;
  /** Broken promises, one line each; empty when the cluster kept its word. */
  violations: string[];
}

/** The node that answers /healthz as leader, or undefined. */
async function leaderOf(nodes: ChildBroker[]): Promise<ChildBroker | undefined> {
  for (const n of nodes) {
    try {
      const h = await (await fetch(`${n.url}/healthz`, { signal: AbortSignal.timeout(500) }))
        .json();
      if (h.cluster_role === "leader" && h.status === "ok") return n;
    } catch { /* down or paused */ }
  }
  return undefined;
}

/** Runs the loop: `kills` leader kills, `loadMs` of load around each. */
export async function runChaos(
  opts: { kills: number; loadMs?: number; log?: (line: string) => void },
): Promise<ChaosResult> {
  const log = opts.log ?? (() => {});
  const loadMs = opts.loadMs ?? 1_500;
  const etcd: EtcdServer = await startEtcd();
  const nodes: ChildBroker[] = [];
  const env = {
    BROKER_CLUSTER_ETCD: etcd.endpoint,
    BROKER_CLUSTER_NAME: "chaos",
    BROKER_ELECTION_TTL: "2s",
  };
  const ledger: Ledger = {
    published: new Map(),
    unknownPublish: new Set(),
    acked: new Set(),
    unknownAck: new Set(),
  };
  const failovers: number[] = [];
  let leader: ChildBroker | undefined;
  let stopping = false;
  let seq = 0;
  let lastPublishOk = 0;

  const refresh = async () => {
    leader = await leaderOf(nodes);
    if (!leader) await new Promise((r) => setTimeout(r, 50)); // electing: ask again shortly
  };

  const publisher = async () => {
    while (!stopping) {
      const to = leader;
      if (!to) {
        await refresh();
        continue;
      }
      const payload = `p-${++seq}`;
      const sentAt = performance.now();
      try {
        const res = await fetch(`${to.url}/publish/${TOPIC}`, {
          method: "POST",
          body: payload,
          redirect: "manual",
          signal: AbortSignal.timeout(15_000),
        });
        const body = await res.text();
        if (res.status === 201) {
          ledger.published.set(payload, JSON.parse(body).id);
          // When it was sent: a publish in flight to the killed leader may still answer 201
          // after the kill, and must not count as the new leader taking writes.
          lastPublishOk = sentAt;
        } else if (res.status >= 500) ledger.unknownPublish.add(payload);
        // 307 or 503 electing: the write was refused before it was made
        if (res.status !== 201) await refresh();
      } catch {
        ledger.unknownPublish.add(payload);
        await refresh();
      }
    }
  };

  const consumer = async () => {
    while (!stopping) {
      const to = leader;
      if (!to) {
        await refresh();
        continue;
      }
      let ids: string[] = [];
      try {
        const res = await fetch(`${to.url}/consume/${TOPIC}?limit=20&visibility=60s`, {
          redirect: "manual",
          signal: AbortSignal.timeout(5_000),
        });
        if (res.status !== 200) {
          await res.body?.cancel();
          await refresh();
          continue;
        }
        const got = await res.json();
        ids = (Array.isArray(got) ? got : [got]).map((m: { id: string }) => m.id);
        const ack = await fetch(`${to.url}/ack/${TOPIC}`, {
          method: "POST",
          body: JSON.stringify({ ids }),
          headers: { "content-type": "application/json" },
          redirect: "manual",
          signal: AbortSignal.timeout(15_000),
        });
        const answer = await ack.text();
        if (ack.status === 200) {
          const missing = new Set(JSON.parse(answer).not_found as string[]);
          for (const id of ids) if (!missing.has(id)) ledger.acked.add(id);
        } else for (const id of ids) ledger.unknownAck.add(id);
      } catch {
        for (const id of ids) ledger.unknownAck.add(id);
        await refresh();
      }
    }
  };

  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(await start(await Deno.makeTempDir({ prefix: "ferry-chaos-" }), env));
    }
    while (!leader) await refresh();
    const load = [...Array(PUBLISHERS)].map(publisher).concat([consumer()]);
    for (let k = 0; k < opts.kills; k++) {
      await new Promise((r) => setTimeout(r, loadMs));
      while (!leader) await refresh(); // still electing after the last kill: wait for it
      const victim = leader;
      await stop(victim, "SIGKILL");
      const killedAt = performance.now(); // answers that raced the kill do not count
      leader = undefined;
      while (lastPublishOk < killedAt) await new Promise((r) => setTimeout(r, 20));
      failovers.push(Math.round(performance.now() - killedAt));
      log(`kill ${k + 1}: a new leader took writes after ${failovers.at(-1)} ms`);
      nodes[nodes.indexOf(victim)] = await start(victim.dataDir, env);
    }
    await new Promise((r) => setTimeout(r, loadMs));
    stopping = true;
    await Promise.all(load);
    while (!leader) await refresh();
    return { failovers, ...await check(leader, ledger) };
  } finally {
    stopping = true;
    for (const n of nodes) {
      await stop(n);
      await Deno.remove(n.dataDir, { recursive: true }).catch(() => {});
    }
    await etcd.stop();
  }
}

/** Drains the topic from the leader and checks it against the ledger. */
async function check(
  leader: ChildBroker,
  ledger: Ledger,
): Promise<Omit<ChaosResult, "failovers">> {
  const held = new Map<string, number>(); // id → times seen
  const payloadOf = new Map<string, string>();
  while (true) {
    const res = await fetch(`${leader.url}/consume/${TOPIC}?limit=1000&auto_ack=true`);
    if (res.status === 404) {
      await res.body?.cancel();
      break;
    }
    if (res.status !== 200) throw new Error(`drain answered ${res.status}: ${await res.text()}`);
    const got = await res.json();
    for (const m of Array.isArray(got) ? got : [got]) {
      held.set(m.id, (held.get(m.id) ?? 0) + 1);
      payloadOf.set(m.id, m.payload_text);
    }
  }
  const violations: string[] = [];
  const known = new Set(ledger.published.values());
  for (const [payload, id] of ledger.published) {
    const n = held.get(id) ?? 0;
    if (ledger.acked.has(id)) {
      if (n) violations.push(`acked ${id} (${payload}) came back`);
    } else if (!ledger.unknownAck.has(id) && n !== 1) {
      violations.push(`published ${id} (${payload}) held ${n} times`);
    }
  }
  for (const [id, n] of held) {
    const payload = payloadOf.get(id) ?? "";
    if (!known.has(id) && !ledger.unknownPublish.has(payload)) {
      violations.push(`${id} (${payload}) was never published`);
    }
    if (n > 1) violations.push(`${id} (${payload}) held ${n} times`);
  }
  return { published: ledger.published.size, acked: ledger.acked.size, violations };
}
