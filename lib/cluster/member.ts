/**
 * @module A node's part in its cluster, built in one place with everything it needs: its view of
 * the cluster (state.ts), the replicator that ships its writes while it leads (replicator.ts),
 * the election over a `Coordination` store (election.ts), and the link that follows the leader's
 * stream while it does not. The network clients (etcd, the leader link) are arguments, from
 * net/; runtime.ts's `joinCluster` supplies them. The broker opens its WALs through the
 * replicator; once the node listens, `start()` campaigns and follows.
 *
 * A node of several workers (docs/architecture.md "Workers") campaigns once, in its supervisor:
 * each worker's member then has no election of its own; its state mirrors the supervisor's,
 * and its replicator, for the worker's shard, reports to the node's chooser (sync.ts).
 */

import { Logger } from "../log.ts";
import type { Coordination } from "./coordination.ts";
import { Election } from "./election.ts";
import { Replicator } from "./replicator.ts";
import { ClusterState, epochClock } from "./state.ts";
import type { Readiness } from "./sync.ts";

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
  /**
   * How this member takes part: it campaigns on the election store (net/etcd.ts), or, as one
   * worker of a node, it follows the supervisor's state (`mirror` it) and reports its shard's
   * followers to the node's chooser.
   */
  role:
    | {
      coordination: Coordination;
      /** False while this node must not lead (its WAL failed): it does not campaign, and resigns. */
      healthy: () => boolean;
    }
    | { report: (r: Readiness) => void };
  /** Starts following the leader while this node does not lead (net/leader_link.ts). */
  followLeader: (state: ClusterState) => { close(): void };
  /** What `cluster: joining` logs besides the node's id and URL (etcd endpoints, the name). */
  describe?: Record<string, unknown>;
}

/** A node of a cluster (or a worker's part in it): state, replicator and election, wired. */
export class ClusterMember {
  readonly state: ClusterState;
  readonly replicator: Replicator;
  /** Undefined in a worker: its supervisor campaigns. */
  readonly election: Election | undefined;
  #link: { close(): void } | undefined;

  constructor(readonly o: MemberOptions) {
    const { log, role } = o;
    const needed = Math.floor(o.size / 2);
    if ("report" in role) {
      // The supervisor logs the node's changes once; a mirror logs none of them again.
      const quiet = new Logger("error");
      this.state = new ClusterState(o.nodeId, o.url, quiet, epochClock);
      this.replicator = new Replicator({ needed, log, sync: { report: role.report } });
      return;
    }
    const state = this.state = new ClusterState(o.nodeId, o.url, log);
    const election = this.election = new Election({
      etcd: role.coordination,
      name: o.name,
      ttlSeconds: o.ttlSeconds,
      state,
      log,
      healthy: role.healthy,
    });
    this.replicator = new Replicator({
      needed,
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
    if (this.election) {
      this.o.log.info("cluster: joining", {
        node_id: this.state.id,
        url: this.state.url,
        ...this.o.describe,
      });
      this.election.start();
    }
    this.#link = this.o.followLeader(this.state);
  }

  /** Stops following and resigns: the others elect a new leader at once. */
  async close(): Promise<void> {
    this.#link?.close();
    if (this.election) await this.election.close();
    else this.state.close();
  }
}
