/**
 * @module This node's place in a cluster: its role, the term, who leads, the peers, and until
 * when its leadership lease holds. The election (lib/cluster/election.ts, on etcd) drives it; the
 * request gate and /healthz, /api/cluster/status and /metrics read it. Time here is monotonic
 * (`performance.now()` by default): a lease must not move with the wall clock.
 */

import { BrokerError } from "../errors.ts";
import type { Logger } from "../log.ts";

/** What a node is doing: leading, following a known leader, or waiting for an election. */
export type Role = "leader" | "follower" | "candidate";

/** The node that leads, as the election store records it. */
export interface LeaderInfo {
  id: string;
  /** Where clients and peers reach it (BROKER_ADVERTISE_URL). */
  url: string;
  term: number;
}

/** Another node of the cluster. */
export interface Peer {
  id: string;
  url: string;
  /** Whether it holds a live registration in the election store. */
  healthy: boolean;
  /** Wall-clock ms when this node last saw it registered. */
  lastSeen: number;
}

/** Where a request that changes state must go. */
export type WriteRoute =
  | { kind: "here" }
  | { kind: "leader"; url: string }
  | { kind: "electing" };

/**
 * A node's state as it crosses to its workers (docs/architecture.md "Workers"): the supervisor
 * campaigns and each worker mirrors it. Lease ends are in `clock()` units, so every side must
 * use the same clock: `epochClock`.
 */
export interface StateView {
  url: string;
  role: Role;
  term: number;
  leader: LeaderInfo | undefined;
  peers: Peer[];
  elections: number;
  leaseEnd: number;
}

/**
 * Monotonic ms on a time line every worker of the process shares (each worker's
 * `performance.now()` starts at its own creation): the process's states use it.
 */
export const epochClock = (): number => performance.timeOrigin + performance.now();

/** The cluster as this node sees it. */
export class ClusterState {
  role: Role = "candidate";
  /** The highest term this node has seen; it never goes down. */
  term = 0;
  leader: LeaderInfo | undefined;
  peers: Peer[] = [];
  /** Elections this node has won since start-up. */
  elections = 0;
  /** Monotonic ms until which this node's leadership lease holds. */
  #leaseEnd = 0;
  #stepDown: ReturnType<typeof setTimeout> | undefined;
  readonly #listeners = new Set<(s: ClusterState) => void>();
  readonly #watchers = new Set<(s: ClusterState) => void>();

  constructor(
    readonly id: string,
    /** Where clients and peers reach this node; main.ts sets it once the port is known. */
    public url: string,
    readonly log: Logger,
    readonly clock: () => number = () => performance.now(),
  ) {}

  /** Calls `fn` after every change of role, term or leader; returns a function that stops it. */
  onChange(fn: (s: ClusterState) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /**
   * Calls `fn` after anything `view()` shows changed, lease renewals and peers included;
   * returns a function that stops it.
   */
  onUpdate(fn: (s: ClusterState) => void): () => void {
    this.#watchers.add(fn);
    return () => this.#watchers.delete(fn);
  }

  /** What a worker's mirror needs (see `mirror`). */
  view(): StateView {
    const { url, role, term, leader, peers, elections } = this;
    return { url, role, term, leader, peers, elections, leaseEnd: this.#leaseEnd };
  }

  /**
   * Takes the supervisor's state as this worker's: role, term, leader and peers, and the lease
   * end, after which this copy stops leading by itself as the original does. Logs nothing (the
   * supervisor has).
   */
  mirror(v: StateView): void {
    const changed = v.role !== this.role || v.term !== this.term ||
      v.leader?.id !== this.leader?.id || v.leader?.term !== this.leader?.term;
    this.url = v.url;
    this.role = v.role;
    this.term = v.term;
    this.leader = v.leader;
    this.peers = v.peers;
    this.elections = v.elections;
    this.#leaseEnd = v.leaseEnd;
    if (this.#stepDown !== undefined) clearTimeout(this.#stepDown);
    this.#stepDown = undefined;
    if (this.role === "leader") {
      const wait = Math.max(0, v.leaseEnd - this.clock());
      this.#stepDown = setTimeout(() => this.lost("the leadership lease ran out"), wait);
    }
    if (changed) this.#changed();
  }

  /** This node won the election for `term`; its lease holds until `leaseEnd`. */
  elected(term: number, leaseEnd: number): void {
    this.#raise(term);
    this.elections++;
    this.role = "leader";
    this.leader = { id: this.id, url: this.url, term };
    this.log.info("cluster: elected leader", { node_id: this.id, term });
    this.renewed(leaseEnd);
    this.#changed();
  }

  /** The lease was renewed until `leaseEnd`. */
  renewed(leaseEnd: number): void {
    this.#leaseEnd = leaseEnd;
    if (this.#stepDown !== undefined) clearTimeout(this.#stepDown);
    if (this.role !== "leader") return;
    // Stop leading the moment the lease may have ended, before anyone else can be elected.
    const wait = Math.max(0, leaseEnd - this.clock());
    this.#stepDown = setTimeout(() => this.lost("the leadership lease ran out"), wait);
    this.#updated();
  }

  /** Another node leads (or, undefined, nobody is known to). */
  follow(leader: LeaderInfo | undefined): void {
    if (leader?.id === this.id) return;
    if (leader && leader.term < this.term) return; // a stale record: never go back in terms
    if (this.role === "leader") this.lost("another node leads");
    const changed = leader?.id !== this.leader?.id || leader?.term !== this.leader?.term;
    if (leader) this.#raise(leader.term);
    this.leader = leader;
    this.role = leader ? "follower" : "candidate";
    if (changed) {
      this.log.info(leader ? "cluster: following" : "cluster: no leader; electing", {
        node_id: this.id,
        leader: leader?.id,
        term: this.term,
      });
      this.#changed();
    }
  }

  /** This node stops leading at once (lease lost, etcd unreachable, another leader seen). */
  lost(reason: string): void {
    if (this.#stepDown !== undefined) clearTimeout(this.#stepDown);
    this.#stepDown = undefined;
    this.#leaseEnd = 0;
    if (this.role !== "leader") return;
    this.role = "candidate";
    this.leader = undefined;
    this.log.warn("cluster: stopped leading", { node_id: this.id, term: this.term, reason });
    this.#changed();
  }

  /** The registered nodes other than this one. */
  setPeers(peers: Peer[]): void {
    this.peers = peers;
    this.#updated();
  }

  /** A peer's role as this node knows it now. */
  roleOf(peer: Peer): Role {
    return peer.id === this.leader?.id ? "leader" : peer.healthy ? "follower" : "candidate";
  }

  /** Whether this node may accept a write now: it leads and its lease still holds. */
  get writable(): boolean {
    return this.role === "leader" && this.clock() < this.#leaseEnd;
  }

  /** Throws `electing` unless this node leads `term` now (a follower's replication link). */
  assertLeads(term: number): void {
    if (this.writable && term === this.term) return;
    throw new BrokerError(
      "electing",
      `This node does not lead term ${term} (it is ${this.role} in term ${this.term})`,
    );
  }

  /** Where a request that changes state goes now. */
  route(): WriteRoute {
    if (this.writable) return { kind: "here" };
    if (this.role === "follower" && this.leader) return { kind: "leader", url: this.leader.url };
    return { kind: "electing" };
  }

  /** Stops the step-down timer (shutdown). */
  close(): void {
    if (this.#stepDown !== undefined) clearTimeout(this.#stepDown);
    this.#stepDown = undefined;
  }

  #raise(term: number): void {
    if (term > this.term) this.term = term;
  }

  #changed(): void {
    for (const fn of [...this.#listeners]) fn(this);
    this.#updated();
  }

  #updated(): void {
    for (const fn of [...this.#watchers]) fn(this);
  }
}
