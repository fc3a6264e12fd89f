/**
 * @module Which followers a leader's writes wait for, chosen once for the whole node. A node
 * with several workers has one replicator per shard (each ships its own topics), but the
 * election store can name only whole nodes: a follower may be named synchronous only if it holds
 * every acknowledged write of *every* shard, or the node named next could lack some. So each
 * shard reports its followers (`Readiness`), and the chooser, one per node, names followers that
 * are ready in all shards, records them (`setSync`), and then tells every shard to count their
 * acks (`apply`). While it replaces one, no shard counts fewer than it needs, so none
 * acknowledges a write meanwhile and "ready" cannot go stale. With one worker there is one shard
 * and the same rules.
 */

/** What one shard's replicator tells its node's chooser. */
export interface Readiness {
  /** The term the shard leads. */
  term: number;
  /** The chooser's generation the shard last applied (-1: none yet this term). */
  generation: number;
  /** Each follower attached to the shard, and whether it holds every write acknowledged so far. */
  peers: [peer: string, ready: boolean][];
}

/** What a SyncChooser is built with. */
export interface ChooserOptions {
  shards: number;
  /** Followers a write waits for: floor(size / 2). */
  needed: number;
  /** Records `peers` in the election store as the synchronous followers; true once stored. */
  setSync: (peers: string[]) => Promise<boolean>;
  /** Tells shard `shard` to count the acks of `peers` from now on (Replicator.useStandbys). */
  apply: (shard: number, peers: string[], generation: number, term: number) => void;
  /** Waits before recording again after a failed attempt (ms). */
  retryMs?: number;
}

/** One node's choice of synchronous followers, over its shards' reports. */
export class SyncChooser {
  #term = -1;
  #generation = 0;
  #standbys: string[] = [];
  #views: (Readiness | undefined)[] = [];
  #switching = false;
  #retry: ReturnType<typeof setTimeout> | undefined;

  constructor(readonly o: ChooserOptions) {}

  /** The followers every shard counts now. */
  get standbys(): readonly string[] {
    return this.#standbys;
  }

  /** Shard `shard` reports its followers. */
  report(shard: number, r: Readiness): void {
    if (r.term < this.#term) return; // a report from a past term
    if (r.term > this.#term) this.#begin(r.term);
    this.#views[shard] = r;
    if (r.generation !== this.#generation) {
      this.o.apply(shard, this.#standbys, this.#generation, this.#term);
      return;
    }
    this.#reconsider();
  }

  /** Stops retrying (the node stops leading or shuts down). */
  close(): void {
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
  }

  /** A new term: nobody counts until chosen and recorded again. */
  #begin(term: number): void {
    this.close();
    this.#term = term;
    this.#standbys = [];
    this.#views = [];
    this.#switching = false;
    this.#applyAll();
    if (this.o.needed === 0) this.o.setSync([]).catch(() => {});
  }

  #applyAll(): void {
    this.#generation++;
    for (let i = 0; i < this.o.shards; i++) {
      this.o.apply(i, this.#standbys, this.#generation, this.#term);
    }
  }

  #reconsider(): void {
    if (this.#switching) return;
    const views: Readiness[] = [];
    for (let i = 0; i < this.o.shards; i++) {
      const v = this.#views[i];
      if (!v || v.generation !== this.#generation) return; // a shard has not caught up yet
      views.push(v);
    }
    const attached = (v: Readiness, p: string) => v.peers.some(([q]) => q === p);
    const ready = (v: Readiness, p: string) => v.peers.some(([q, r]) => q === p && r);
    // A synchronous follower gone from any shard counts nowhere: that shard could not confirm.
    const kept = this.#standbys.filter((p) => views.every((v) => attached(v, p)));
    if (kept.length < this.#standbys.length) {
      this.#standbys = kept;
      this.#applyAll(); // then wait for every shard to say it counts only these
      return;
    }
    const { needed } = this.o;
    if (kept.length >= needed) return;
    // Every shard counts fewer than it needs, so none acknowledges: readiness holds still.
    const candidates = views[0]!.peers.map(([p]) => p)
      .filter((p) => !kept.includes(p) && views.every((v) => ready(v, p)))
      .sort();
    if (kept.length + candidates.length < needed) return;
    const chosen = [...kept, ...candidates.slice(0, needed - kept.length)];
    this.#switching = true;
    const term = this.#term;
    const settle = (stored: boolean) => {
      if (term !== this.#term) return; // a new term began meanwhile
      this.#switching = false;
      if (stored) {
        this.#standbys = chosen;
        this.#applyAll();
      } else {
        this.#retry = setTimeout(() => {
          this.#retry = undefined;
          this.#reconsider();
        }, this.o.retryMs ?? 250);
      }
    };
    this.o.setSync(chosen).then(settle, () => settle(false));
  }
}
