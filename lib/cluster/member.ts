/**
 * @module A node's part in its cluster, built in one place with everything it needs: its view of
 * the cluster (state.ts), the replicator that ships its writes while it leads (replicator.ts),
 * the election over a `Coordination` store (election.ts), and the link that follows the leader's
 * stream while it does not. The network clients (etcd, the leader link) are arguments, from
 * net/; runtime.ts's `joinCluster` supplies them. The broker opens its WALs through the
 * replicator; once the node listens, `start()` campaigns and follows.
 */

import type { Logger } from "../log.ts";
import type { Coordination } from "./coordination.ts";
import { Election } from "./election.ts";
import { Replicator } from "./replicator.ts";
import { ClusterState } from "./state.ts";

/** What a ClusterMember is built with. */
export interface MemberOptions {
  nodeId: string;
  /** Where clients and peers reach this node (serve.ts sets it again once the port is known). */
  url: string;
  /** Nodes in the cluster (BROKER_CLUSTER_SIZE): a write waits for floor(size / 2) followers. */
  size: number;
  /** The election's key prefix (BROKER_CLUSTER_NAME). */
  name: string;
  /** The leader lease's TTL (BROKER_ELECTION_TTL), whole seconds. */
  ttlSeconds: number;
  log: Logger;
  /** The election store (net/etcd.ts). */
  coordination: Coordination;
  /** False while this node must not lead (its WAL failed): it does not campaign, and resigns. */
  healthy: () => boolean;
  /** Starts following the leader while this node does not lead (net/leader_link.ts). */
  followLeader: (state: ClusterState) => { close(): void };
  /** What `cluster: joining` logs besides the node's id and URL (etcd endpoints, the name). */
  describe?: Record<string, unknown>;
}

/** A node of a cluster: state, replicator and election, wired at construction. */
export class ClusterMember {
  readonly state: ClusterState;
  readonly replicator: Replicator;
  readonly election: Election;
  #link: { close(): void } | undefined;

  constructor(readonly o: MemberOptions) {
    const { log } = o;
    const state = this.state = new ClusterState(o.nodeId, o.url, log);
    const election = this.election = new Election({
      etcd: o.coordination,
      name: o.name,
      ttlSeconds: o.ttlSeconds,
      state,
      log,
      healthy: o.healthy,
    });
    this.replicator = new Replicator({
      needed: Math.floor(o.size / 2),
      log,
      sync: { setSync: (peers) => election.setSync([state.id, ...peers]) },
    });
  }

  /**
   * Campaigns and follows whoever leads; call once the node's URL is known. Until a leader is
   * elected, the node answers 503 `electing`.
   */
  start(): void {
    if (this.#link) return;
    this.o.log.info("cluster: joining", {
      node_id: this.state.id,
      url: this.state.url,
      ...this.o.describe,
    });
    this.election.start();
    this.#link = this.o.followLeader(this.state);
  }

  /** Stops following and resigns: the others elect a new leader at once. */
  async close(): Promise<void> {
    this.#link?.close();
    await this.election.close();
  }
}
