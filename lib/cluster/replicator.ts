/**
 * @module The leader's side of replication. Every WAL append and topic deletion of a leader is
 * an entry of the stream (replicated_wal.ts puts them here); the entries of one turn go to
 * every connected follower as one message. A write's promise resolves once `needed` followers
 * have acked an index at or past its entry: with the leader's own fsync, a quorum has it on
 * disk. A follower that connects gets a snapshot of every topic first (the state that all
 * entries shipped so far produced), then the live stream.
 *
 * Which followers count is fixed, as in Patroni's synchronous mode: the leader picks `needed`
 * followers that hold every write acknowledged so far, records them in the election store, and
 * from then on a write is answered when *those* have it. Only they and the leader may be elected
 * next, so a new leader always holds every acknowledged write. While a synchronous follower is
 * replaced, nothing is acknowledged. The choice is the node's (sync.ts): this replicator reports
 * its followers and counts the ones it is told (`useStandbys`).
 */

import { BrokerError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { encodeMessage, type Entry } from "./replica_stream.ts";
import { type Readiness, SyncChooser } from "./sync.ts";

/** A follower's connection, as the transport (routes/replicate.ts) gives it. */
export interface ReplicaLink {
  send(msg: Uint8Array): void;
  /** Bytes queued and not yet sent. */
  readonly bufferedAmount: number;
  close(reason: string): void;
}

/** One connected follower. */
export interface Session {
  readonly peer: string;
  readonly link: ReplicaLink;
  /** The highest index it has on disk. */
  acked: number;
  /** The index its snapshot stands for: it holds nothing until it has acked this. */
  readonly from: number;
}

interface Wait {
  index: number;
  deadline: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

/** A follower this far behind in unsent bytes is cut off; it reconnects and takes a snapshot. */
export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** How long a write waits for a quorum before it is answered 503 `unavailable`. */
export const QUORUM_TIMEOUT_MS = 10_000;
/** Bytes of frames per snapshot message. */
const SNAPSHOT_CHUNK_BYTES = 4 * 1024 * 1024;

/** What a Replicator is built with. */
export interface ReplicatorOptions {
  /** Followers that must have an entry before its write is answered: floor(size / 2). */
  needed: number;
  log: Logger;
  /**
   * Where the choice of synchronous followers is made: `report` to the node's chooser (one
   * replicator of several shards), or `setSync` to record them in the election store (the
   * election's `setSync`, resolving true once stored), this replicator choosing alone.
   */
  sync: { report: (r: Readiness) => void } | { setSync: (peers: string[]) => Promise<boolean> };
  clock?: () => number;
}

/** Ships the leader's entries to its followers and tells writes when a quorum has them. */
export class Replicator {
  /** Entries shipped since this node began leading. */
  #index = 0;
  #pending: Entry[] = [];
  #flushQueued = false;
  readonly sessions = new Set<Session>();
  #waits: Wait[] = [];
  #active = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The followers whose acks count (each must have an entry), as the election store names them. */
  #standbys = new Set<Session>();
  /** The term this replicator leads, and the chooser's generation it last applied. */
  #term = 0;
  #syncGeneration = -1;
  /** The last readiness reported, so an unchanged one is not sent again. */
  #reported = "";
  readonly #report: (r: Readiness) => void;
  /** When each batch was sent (its last index), until every follower has confirmed it. */
  #shipped: { index: number; at: number }[] = [];
  /** The promise the entries of this turn share, and its wait (see ship). */
  #batch: Promise<void> | undefined;
  #batchWait: Wait | undefined;
  /** The highest index a writer has been answered for. */
  #acknowledged = 0;
  /** Counts activations and deactivations, so a late answer of a past term is ignored. */
  #generation = 0;
  /** Every topic's frames as the stream entries that rebuild them, while this node leads. */
  #snapshot: () => Entry[] = () => [];
  readonly needed: number;
  readonly log: Logger;
  readonly clock: () => number;

  constructor(o: ReplicatorOptions) {
    this.needed = o.needed;
    this.log = o.log;
    this.clock = o.clock ?? (() => performance.now());
    if ("report" in o.sync) this.#report = o.sync.report;
    else {
      const chooser = new SyncChooser({
        shards: 1,
        needed: o.needed,
        setSync: o.sync.setSync,
        apply: (_, peers, generation, term) => this.useStandbys(peers, generation, term),
      });
      this.#report = (r) => chooser.report(0, r);
    }
  }

  /** Whether this node leads: only then are its appends shipped. */
  get active(): boolean {
    return this.#active;
  }

  /**
   * This node now leads in `term`: a new stream starts (at index 1, so that a snapshot is
   * acked), and a follower that connects gets `snapshot()` first.
   */
  activate(snapshot: () => Entry[], term = this.#term + 1): void {
    this.deactivate("a new term began");
    this.#snapshot = snapshot;
    this.#active = true;
    this.#term = term;
    this.#index = 1;
    this.#timer = setInterval(() => this.#expire(), 250);
    this.#reportReadiness();
  }

  /**
   * The node's chooser names the followers whose acks count from now on (its `generation`,
   * for `term`); a follower not attached here does not count, and the next report says so.
   */
  useStandbys(peers: readonly string[], generation: number, term: number): void {
    if (!this.#active || term !== this.#term) return;
    this.#syncGeneration = generation;
    const best = new Map<string, Session>();
    for (const s of this.sessions) {
      const b = best.get(s.peer);
      if (peers.includes(s.peer) && (!b || s.acked > b.acked)) best.set(s.peer, s);
    }
    this.#standbys = new Set(best.values());
    this.#settle();
    this.#reportReadiness();
  }

  /** This node stops leading: followers are cut off and waiting writes fail. */
  deactivate(reason: string): void {
    this.#generation++;
    this.#active = false;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    for (const s of this.sessions) s.link.close(reason);
    this.sessions.clear();
    const waits = this.#batchWait ? [...this.#waits, this.#batchWait] : this.#waits;
    this.#waits = [];
    this.#batch = this.#batchWait = undefined;
    const err = new BrokerError("unavailable", `Cannot confirm the write: ${reason}`);
    for (const w of waits) w.reject(err);
    this.#pending = [];
    this.#shipped = [];
    this.#index = 0;
    this.#acknowledged = 0;
    this.#standbys.clear();
    this.#syncGeneration = -1;
    this.#reported = "";
  }

  /**
   * Queues an entry; resolves once a quorum has it (at once when not leading). The entries of
   * one turn share one message and one promise: it resolves once the message's last index is
   * confirmed.
   */
  ship(e: Entry): Promise<void> {
    if (!this.#active) return Promise.resolve();
    this.#pending.push(e);
    ++this.#index;
    if (!this.#flushQueued) {
      // One message per event-loop turn, not per microtask: a WebSocket send costs far more
      // than the record, so the turn's publishes (every request read in it) travel together.
      this.#flushQueued = true;
      setImmediate(() => this.#flush());
    }
    if (this.needed === 0) return Promise.resolve();
    // Its index is the turn's last, known when the message goes out (#flush).
    this.#batch ??= new Promise((resolve, reject) => {
      this.#batchWait = { index: Infinity, deadline: 0, resolve, reject };
    });
    return this.#batch;
  }

  #flush(): void {
    this.#flushQueued = false;
    const wait = this.#batchWait;
    this.#batch = this.#batchWait = undefined;
    if (wait) {
      wait.index = this.#index;
      wait.deadline = this.clock() + QUORUM_TIMEOUT_MS;
      this.#waits.push(wait);
    }
    if (!this.#pending.length) return;
    const msg = encodeMessage(this.#index, this.#pending);
    this.#pending = [];
    if (this.sessions.size) this.#shipped.push({ index: this.#index, at: this.clock() });
    for (const s of this.sessions) this.#send(s, msg);
  }

  #send(s: Session, msg: Uint8Array): void {
    if (s.link.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.detach(s, "it fell too far behind");
      return;
    }
    s.link.send(msg);
  }

  /** A follower connected: it gets the snapshot, then every entry from now on. */
  attach(peer: string, link: ReplicaLink): Session {
    this.#flush(); // what is queued belongs to the followers already there, and to the snapshot
    const s: Session = { peer, link, acked: 0, from: this.#index };
    const entries: Entry[] = [{ kind: "snapshot-begin" }, ...this.#snapshot()];
    let chunk: Entry[] = [];
    let bytes = 0;
    for (const e of entries) {
      chunk.push(e);
      bytes += e.kind === "record" ? e.frame.length : 0;
      if (bytes >= SNAPSHOT_CHUNK_BYTES) {
        link.send(encodeMessage(0, chunk)); // index 0: nothing to ack before the end
        chunk = [];
        bytes = 0;
      }
    }
    chunk.push({ kind: "snapshot-end" });
    link.send(encodeMessage(this.#index, chunk));
    this.sessions.add(s);
    this.log.info("cluster: follower attached", { peer, index: this.#index });
    this.#reportReadiness();
    return s;
  }

  /** A follower left (or is cut off). */
  detach(s: Session, reason: string): void {
    if (!this.sessions.delete(s)) return;
    s.link.close(reason);
    this.log.warn("cluster: follower detached", { peer: s.peer, reason });
    this.#forgetConfirmed();
    this.#standbys.delete(s);
    this.#reportReadiness();
  }

  /** A follower has everything up to `index` on disk. */
  ack(s: Session, index: number): void {
    if (index <= s.acked || index > this.#index) return;
    s.acked = index;
    this.#settle();
    this.#reportReadiness();
    this.#forgetConfirmed();
  }

  /** Drops the send times of batches every follower has confirmed. */
  #forgetConfirmed(): void {
    let all = Infinity;
    for (const s of this.sessions) all = Math.min(all, s.acked);
    let n = 0;
    while (n < this.#shipped.length && this.#shipped[n]!.index <= all) n++;
    if (n) this.#shipped.splice(0, n);
  }

  /** Answers the writes the synchronous followers all have. */
  #settle(): void {
    if (this.#standbys.size < this.needed) return;
    let quorum = Infinity;
    for (const s of this.#standbys) quorum = Math.min(quorum, s.acked);
    let n = 0;
    while (n < this.#waits.length && this.#waits[n]!.index <= quorum) this.#waits[n++]!.resolve();
    if (n) this.#waits.splice(0, n);
    if (quorum > this.#acknowledged && quorum !== Infinity) this.#acknowledged = quorum;
  }

  /**
   * Tells the node's chooser each follower here and whether it holds every write acknowledged
   * so far (and its snapshot), when that changed.
   */
  #reportReadiness(): void {
    if (!this.#active) return;
    const floor = this.#acknowledged;
    const ready = new Map<string, boolean>();
    for (const s of this.sessions) {
      ready.set(s.peer, ready.get(s.peer) || (s.acked >= s.from && s.acked >= floor));
    }
    const r: Readiness = {
      term: this.#term,
      generation: this.#syncGeneration,
      peers: [...ready].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
    };
    const key = JSON.stringify(r);
    if (key === this.#reported) return;
    this.#reported = key;
    this.#report(r);
  }

  /** The followers whose acks count now. */
  get standbys(): string[] {
    return [...this.#standbys].map((s) => s.peer);
  }

  /** How far each follower is behind, in entries. */
  lag(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.sessions) out.set(s.peer, this.#index - s.acked);
    return out;
  }

  /** How long each follower has had entries it has not confirmed, in seconds (0: none). */
  lagSeconds(): Map<string, number> {
    const now = this.clock();
    const out = new Map<string, number>();
    for (const s of this.sessions) {
      const first = this.#shipped.find((b) => b.index > s.acked);
      out.set(s.peer, first ? (now - first.at) / 1000 : 0);
    }
    return out;
  }

  /** Fails the writes that waited too long for a quorum. */
  #expire(): void {
    const now = this.clock();
    let n = 0;
    while (n < this.#waits.length && this.#waits[n]!.deadline <= now) n++;
    if (!n) return;
    const err = new BrokerError(
      "unavailable",
      `No quorum: fewer than ${this.needed} follower(s) confirmed the write within ${
        QUORUM_TIMEOUT_MS / 1000
      } s`,
    );
    for (const w of this.#waits.splice(0, n)) w.reject(err);
  }
}
