/**
 * @module What the election needs of its coordination store: leases, keys, a compare-and-swap
 * transaction and a watch, as etcd v3 offers them. `net/etcd.ts` implements it over etcd's JSON
 * gateway; lib defines the port so that the election depends on no network code.
 */

/** One key as etcd returns it. */
export interface KeyValue {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  lease: string;
}

/** A comparison of a transaction: the key's create or mod revision, or its value, equals. */
export type Compare =
  | { key: string; createRevision: number }
  | { key: string; modRevision: number };

/** A put of a transaction. */
export interface Put {
  key: string;
  value: string;
  lease?: string;
}

/** A watch event on one key. */
export interface WatchEvent {
  type: "PUT" | "DELETE";
  kv: KeyValue;
}

/** The coordination store's calls, as the election uses them. */
export interface Coordination {
  /** A new lease of `ttlSeconds`; its id. */
  grant(ttlSeconds: number): Promise<string>;
  /** Renews a lease; its remaining TTL in seconds (0: it is gone). */
  keepAlive(lease: string): Promise<number>;
  revoke(lease: string): Promise<void>;
  /** One key, and the store's revision at the read. */
  get(key: string): Promise<{ kv: KeyValue | undefined; revision: number }>;
  /** Every key starting with `prefix`. */
  list(prefix: string): Promise<KeyValue[]>;
  put(p: Put): Promise<void>;
  /** Runs `puts` when every comparison holds; the new revision, or 0 when one failed. */
  txn(compare: Compare[], puts: Put[]): Promise<number>;
  /** Calls `on` per event on `key` from `revision` until `signal` aborts or the watch breaks. */
  watch(
    key: string,
    revision: number,
    on: (e: WatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void>;
}
