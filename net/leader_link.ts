/**
 * @module A follower's connection to its leader: while the node follows a known leader it holds
 * one WebSocket to `{leader}/cluster/replicate?node=&term=` (each worker one, with `&shard=`),
 * its admin key in `Authorization`,
 * applies what comes through a fresh `Follower` (a snapshot first, then the stream) and acks. When the leader or the role changes
 * the connection ends; a broken one is opened again after 100 ms, doubling up to 1 s.
 */

import type { Broker } from "../lib/broker.ts";
import type { ClusterState, LeaderInfo } from "../lib/cluster/state.ts";
import type { Logger } from "../lib/log.ts";

const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 1_000;

/** Keeps this node replicating from whoever leads. */
export class ReplicaClient {
  #socket: WebSocket | undefined;
  /** The leader (and term) the socket is for. */
  #target: LeaderInfo | undefined;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #waitMs = RETRY_FIRST_MS;
  #closed = false;
  readonly #off: () => void;

  constructor(
    readonly broker: Broker,
    readonly state: ClusterState,
    readonly log: Logger,
    /** An admin key for the leader when API keys are on. */
    readonly apiKey: string | undefined,
    /** For an `https://` leader: trusts BROKER_CLUSTER_CA besides the platform's CAs. */
    readonly client?: Deno.HttpClient,
  ) {
    this.#off = state.onChange(() => this.#reconcile());
    this.#reconcile();
  }

  close(): void {
    this.#closed = true;
    this.#off();
    this.#disconnect();
  }

  /** Connects to the leader of the moment, or disconnects when there is none to follow. */
  #reconcile(): void {
    if (this.#closed) return;
    const { role, leader } = this.state;
    const want = role === "follower" ? leader : undefined;
    if (want?.id === this.#target?.id && want?.term === this.#target?.term) return;
    this.#disconnect();
    this.#waitMs = RETRY_FIRST_MS;
    if (want) this.#connect(want);
  }

  #disconnect(): void {
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#target = undefined;
    const s = this.#socket;
    this.#socket = undefined;
    if (s && s.readyState <= WebSocket.OPEN) s.close(1000, "following another leader");
  }

  #connect(leader: LeaderInfo): void {
    this.#target = leader;
    const url = new URL("/cluster/replicate", leader.url);
    url.searchParams.set("node", this.state.id);
    url.searchParams.set("term", String(leader.term));
    const shard = this.broker.shard;
    if (shard) {
      // One connection per worker, to the leader's worker of the same shard.
      url.searchParams.set("shard", String(shard.index));
      url.searchParams.set("shards", String(shard.count));
    }
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    // In a header, never the URL: a proxy's access log records URLs (docs/cluster.md).
    const headers = this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : undefined;
    const socket = new WebSocket(url, { client: this.client, headers });
    socket.binaryType = "arraybuffer";
    this.#socket = socket;
    const follower = this.broker.follower((e) => {
      this.log.error("cluster: cannot write the leader's stream", { error: e.message });
      socket.close(1011, "cannot write the stream");
    });
    // Acks of one turn go as one frame: the highest index covers the ones before it.
    let ackIndex = 0;
    let ackQueued = false;
    const ack = (index: number) => {
      ackIndex = index;
      if (ackQueued) return;
      ackQueued = true;
      setImmediate(() => {
        ackQueued = false;
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ ack: ackIndex }));
      });
    };
    socket.addEventListener("open", () => {
      this.#waitMs = RETRY_FIRST_MS;
      this.log.info("cluster: replicating", { leader: leader.id, term: leader.term });
    });
    socket.addEventListener("message", (e) => {
      if (!(e.data instanceof ArrayBuffer)) return;
      try {
        follower.apply(new Uint8Array(e.data), ack);
      } catch (err) {
        this.log.error("cluster: replication stream refused", { error: (err as Error).message });
        socket.close(1002, "malformed stream");
      }
    });
    socket.addEventListener("close", (e) => {
      if (this.#socket !== socket || this.#closed) return;
      this.#socket = undefined;
      this.log.warn("cluster: replication connection ended", {
        leader: leader.id,
        code: e.code,
        reason: e.reason,
        retry_ms: this.#waitMs,
      });
      this.#retry = setTimeout(() => {
        this.#retry = undefined;
        if (this.#target === leader) this.#connect(leader);
      }, this.#waitMs);
      this.#waitMs = Math.min(this.#waitMs * 2, RETRY_MAX_MS);
    });
    socket.addEventListener("error", () => {/* the close event follows */});
  }
}
