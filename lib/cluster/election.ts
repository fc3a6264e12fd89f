/**
 * @module Leader election on etcd, as Patroni does it: each node holds an etcd lease and
 * registers itself under `{name}/members/`; the leader is whoever created `{name}/leader` (bound
 * to its lease) in the same transaction that raised `{name}/term` by compare-and-swap, so a term
 * is won once and only grows. The others watch the leader key and campaign when it goes (its
 * lease ran out, or it resigned); only the nodes `{name}/sync` names may (see `#mayLead`). A
 * leader counts its lease from when it *sent* each renewal, so it stops leading before etcd can
 * let anyone else win.
 */

import type { ClusterState, LeaderInfo, Peer } from "./state.ts";
import type { Logger } from "../log.ts";
import type { Coordination } from "./coordination.ts";

/** Longest wait between two attempts to reach etcd. */
const RETRY_MAX_MS = 1_000;

/** How a node takes part in elections. */
export interface ElectionOptions {
  etcd: Coordination;
  /** The cluster's key prefix (BROKER_CLUSTER_NAME). */
  name: string;
  /** The lease's TTL (BROKER_ELECTION_TTL), whole seconds. */
  ttlSeconds: number;
  state: ClusterState;
  log: Logger;
  /** False while this node must not lead (its WAL failed): it does not campaign, and resigns. */
  healthy?: () => boolean;
}

/** Campaigns for leadership and follows whoever leads, until closed. */
export class Election {
  readonly #o: ElectionOptions;
  #closed = false;
  #lease: string | undefined;
  #session: AbortController | undefined;
  #done: Promise<void> | undefined;
  /** The revision that created this node's leader key, while it leads. */
  #leaderRevision = 0;
  readonly #seen = new Map<string, Peer>();

  constructor(o: ElectionOptions) {
    this.#o = o;
  }

  get #leaderKey() {
    return `${this.#o.name}/leader`;
  }
  get #termKey() {
    return `${this.#o.name}/term`;
  }
  get #syncKey() {
    return `${this.#o.name}/sync`;
  }
  get #membersPrefix() {
    return `${this.#o.name}/members/`;
  }

  /** Starts taking part; returns at once. */
  start(): void {
    this.#done = this.#run();
  }

  /** Stops: resigns (the lease and the keys on it go, so the others elect at once). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#session?.abort();
    await this.#done;
    const lease = this.#lease;
    this.#o.state.lost("shutting down");
    this.#o.state.close();
    if (lease) await this.#o.etcd.revoke(lease).catch(() => {});
  }

  async #run(): Promise<void> {
    let waitMs = 100;
    while (!this.#closed) {
      const session = new AbortController();
      this.#session = session;
      try {
        await this.#campaign(session.signal);
        waitMs = 100;
      } catch (e) {
        if (!this.#closed) {
          this.#o.log.warn("cluster: etcd session ended", { error: (e as Error).message });
        }
      } finally {
        session.abort();
      }
      if (this.#closed) return;
      this.#o.state.lost("its etcd session ended");
      this.#o.state.follow(undefined);
      await new Promise((r) => setTimeout(r, waitMs));
      waitMs = Math.min(waitMs * 2, RETRY_MAX_MS);
    }
  }

  /** One lease's life: register, keep it alive, and lead or follow until it ends. */
  async #campaign(signal: AbortSignal): Promise<void> {
    const { etcd, state, ttlSeconds } = this.#o;
    const clock = state.clock;
    const sent = clock();
    const lease = await etcd.grant(ttlSeconds);
    this.#lease = lease;
    let leaseEnd = sent + ttlSeconds * 1000;
    await etcd.put({
      key: this.#membersPrefix + state.id,
      value: JSON.stringify({ id: state.id, url: state.url }),
      lease,
    });
    const keepAlive = setInterval(async () => {
      const at = clock();
      if (state.role === "leader" && !this.#healthy()) {
        // A leader that can no longer write resigns: the next one is elected at once.
        this.#session?.abort(new Error("this node cannot write its WAL"));
        return;
      }
      try {
        const ttl = await etcd.keepAlive(lease);
        if (ttl <= 0) throw new Error("the lease is gone");
        leaseEnd = at + ttl * 1000;
        if (state.role === "leader") state.renewed(leaseEnd);
        await this.#refreshPeers();
      } catch (e) {
        if (clock() >= leaseEnd || (e as Error).message === "the lease is gone") {
          this.#session?.abort(new Error(`lease lost: ${(e as Error).message}`));
        }
      }
    }, (ttlSeconds * 1000) / 3);
    try {
      await this.#refreshPeers();
      while (!signal.aborted) await this.#round(lease, () => leaseEnd, signal);
    } finally {
      clearInterval(keepAlive);
      if (this.#lease === lease && !this.#closed) {
        this.#lease = undefined;
        etcd.revoke(lease).catch(() => {});
      }
    }
    if (signal.reason instanceof Error && !this.#closed) throw signal.reason;
  }

  /**
   * Takes the lead if nobody holds it and this node may (see `#mayLead`), else follows the
   * holder, or waits, until the leader key changes.
   */
  async #round(lease: string, leaseEnd: () => number, signal: AbortSignal): Promise<void> {
    const { etcd, state } = this.#o;
    const { kv, revision } = await etcd.get(this.#leaderKey);
    if (!kv) {
      const sync = await etcd.get(this.#syncKey);
      if (this.#healthy() && this.#mayLead(sync.kv?.value)) {
        const term = await etcd.get(this.#termKey);
        const next = Number(term.kv?.value ?? 0) + 1;
        const info: LeaderInfo = { id: state.id, url: state.url, term: next };
        const won = await etcd.txn([
          { key: this.#leaderKey, createRevision: 0 },
          term.kv
            ? { key: this.#termKey, modRevision: term.kv.modRevision }
            : { key: this.#termKey, createRevision: 0 },
          sync.kv
            ? { key: this.#syncKey, modRevision: sync.kv.modRevision }
            : { key: this.#syncKey, createRevision: 0 },
        ], [
          { key: this.#leaderKey, value: JSON.stringify(info), lease },
          { key: this.#termKey, value: String(next) },
        ]);
        if (won) this.#leaderRevision = won;
        if (won && !signal.aborted) state.elected(next, leaseEnd());
        return; // read the key again: ours now, or whoever won
      }
      state.follow(undefined);
      if (!this.#healthy()) {
        this.#o.log.warn("cluster: not campaigning: this node cannot write its WAL");
      } else {
        this.#o.log.info("cluster: waiting for a node that has every acknowledged write", {
          allowed: sync.kv?.value,
        });
      }
    } else {
      const info = JSON.parse(kv.value) as LeaderInfo;
      if (kv.lease !== lease) state.follow(info.id === state.id ? undefined : info);
    }
    // Wait until the leader key is created, deleted or rewritten; then another round.
    if (signal.aborted) return; // ended while we read etcd: an abort listener would never fire
    const ac = new AbortController();
    const stop = () => ac.abort();
    signal.addEventListener("abort", stop, { once: true });
    try {
      await etcd.watch(this.#leaderKey, revision + 1, () => ac.abort(), ac.signal);
    } catch (e) {
      if (!ac.signal.aborted) throw e;
    } finally {
      signal.removeEventListener("abort", stop);
    }
  }

  #healthy(): boolean {
    return this.#o.healthy?.() ?? true;
  }

  /**
   * Whether this node may campaign: only the nodes the sync key names hold every write a
   * leader acknowledged (the last leader and its synchronous followers), so only they may lead
   * next, as in Patroni's synchronous mode. With no sync key yet, any node may.
   */
  #mayLead(sync: string | undefined): boolean {
    if (sync === undefined) return true;
    const { nodes } = JSON.parse(sync) as { nodes: string[] };
    return nodes.includes(this.#o.state.id);
  }

  /**
   * Records, while this node still holds the leader key, that `nodes` (this node and its
   * synchronous followers) now hold every acknowledged write; only they may lead next. Resolves
   * true once stored.
   */
  async setSync(nodes: string[]): Promise<boolean> {
    const rev = this.#leaderRevision;
    if (!rev || this.#o.state.role !== "leader") return false;
    try {
      const stored = await this.#o.etcd.txn([{ key: this.#leaderKey, createRevision: rev }], [{
        key: this.#syncKey,
        value: JSON.stringify({ nodes, term: this.#o.state.term }),
      }]);
      if (stored) this.#o.log.info("cluster: synchronous followers", { nodes });
      return stored > 0;
    } catch (e) {
      this.#o.log.warn("cluster: cannot record the synchronous followers", {
        error: (e as Error).message,
      });
      return false;
    }
  }

  /** Reads the registered members into the state's peers (this node left out). */
  async #refreshPeers(): Promise<void> {
    const { etcd, state } = this.#o;
    const members = await etcd.list(this.#membersPrefix);
    const now = Date.now();
    const live = new Set<string>();
    for (const m of members) {
      const { id, url } = JSON.parse(m.value) as { id: string; url: string };
      if (id === state.id) continue;
      live.add(id);
      this.#seen.set(id, { id, url, healthy: true, lastSeen: now });
    }
    for (const p of this.#seen.values()) if (!live.has(p.id)) p.healthy = false;
    state.setPeers([...this.#seen.values()]);
  }
}
