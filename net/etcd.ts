/**
 * @module The few etcd v3 calls the election needs, over etcd's JSON gateway (`/v3/...`) with
 * plain fetch: no gRPC stack and no permission beyond the network, and every call has a
 * timeout we choose (the election's timing depends on it). Keys and values are UTF-8 strings;
 * the gateway wants them Base64-encoded and int64 values as strings.
 */

import type {
  Compare,
  Coordination,
  KeyValue,
  Put,
  WatchEvent,
} from "../lib/cluster/coordination.ts";

const b64 = (s: string) => new TextEncoder().encode(s).toBase64();
const unb64 = (s: string | undefined) =>
  s ? new TextDecoder().decode(Uint8Array.fromBase64(s)) : "";

/** The end of the key range that holds every key starting with `prefix`. */
function prefixEnd(prefix: string): string {
  const bytes = new TextEncoder().encode(prefix);
  bytes[bytes.length - 1]!++;
  return bytes.toBase64();
}

// deno-lint-ignore no-explicit-any
function kvOf(raw: any): KeyValue {
  return {
    key: unb64(raw.key),
    value: unb64(raw.value),
    createRevision: Number(raw.create_revision ?? 0),
    modRevision: Number(raw.mod_revision ?? 0),
    lease: String(raw.lease ?? "0"),
  };
}

/** An etcd client over the JSON gateway of one or more endpoints, tried in turn. */
export class Etcd implements Coordination {
  readonly #endpoints: string[];
  #current = 0;

  constructor(
    endpoints: string[],
    readonly timeoutMs: number,
    /** For `https://` endpoints: the CA to trust and the client certificate to present. */
    readonly client?: Deno.HttpClient,
  ) {
    this.#endpoints = endpoints.map((e) => (/^https?:\/\//.test(e) ? e : `http://${e}`));
  }

  /** A new lease of `ttlSeconds`; its id. */
  async grant(ttlSeconds: number): Promise<string> {
    const r = await this.#call("/v3/lease/grant", { TTL: ttlSeconds });
    return String(r.ID);
  }

  /** Renews a lease; its remaining TTL in seconds (0: the lease is gone). */
  async keepAlive(lease: string): Promise<number> {
    const r = await this.#call("/v3/lease/keepalive", { ID: lease });
    return Number(r.result?.TTL ?? 0);
  }

  /** Ends a lease and deletes its keys. */
  async revoke(lease: string): Promise<void> {
    await this.#call("/v3/lease/revoke", { ID: lease });
  }

  /** One key, or undefined. */
  async get(key: string): Promise<{ kv: KeyValue | undefined; revision: number }> {
    const r = await this.#call("/v3/kv/range", { key: b64(key) });
    return { kv: r.kvs?.[0] ? kvOf(r.kvs[0]) : undefined, revision: Number(r.header.revision) };
  }

  /** Every key under `prefix`. */
  async list(prefix: string): Promise<KeyValue[]> {
    const r = await this.#call("/v3/kv/range", { key: b64(prefix), range_end: prefixEnd(prefix) });
    return (r.kvs ?? []).map(kvOf);
  }

  async put(p: Put): Promise<void> {
    await this.#call("/v3/kv/put", { key: b64(p.key), value: b64(p.value), lease: p.lease });
  }

  /** Puts `puts` if every comparison holds; the store's revision after it, or 0 if it did not. */
  async txn(compare: Compare[], puts: Put[]): Promise<number> {
    const r = await this.#call("/v3/kv/txn", {
      compare: compare.map((c) =>
        "createRevision" in c
          ? {
            key: b64(c.key),
            target: "CREATE",
            result: "EQUAL",
            create_revision: String(c.createRevision),
          }
          : { key: b64(c.key), target: "MOD", result: "EQUAL", mod_revision: String(c.modRevision) }
      ),
      success: puts.map((p) => ({
        request_put: { key: b64(p.key), value: b64(p.value), lease: p.lease },
      })),
    });
    return r.succeeded === true ? Number(r.header.revision) : 0;
  }

  /**
   * Watches `key` from `revision` on, calling `on` per event, until `signal` aborts or the
   * stream breaks (then it throws; the caller reads the key again and watches anew).
   */
  async watch(
    key: string,
    revision: number,
    on: (e: WatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const res = await fetch(`${this.#endpoints[this.#current]}/v3/watch`, {
      method: "POST",
      body: JSON.stringify({ create_request: { key: b64(key), start_revision: String(revision) } }),
      signal,
      client: this.client,
    });
    if (!res.ok || !res.body) throw new Error(`etcd watch answered ${res.status}`);
    let buffered = "";
    for await (const chunk of res.body.pipeThrough(new TextDecoderStream())) {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (!line) continue;
        const msg = JSON.parse(line);
        if (msg.error) throw new Error(`etcd watch: ${msg.error.message ?? "error"}`);
        for (const e of msg.result?.events ?? []) {
          on({ type: e.type === "DELETE" ? "DELETE" : "PUT", kv: kvOf(e.kv) });
        }
      }
    }
    throw new Error("etcd watch stream ended");
  }

  // deno-lint-ignore no-explicit-any
  async #call(path: string, body: unknown): Promise<any> {
    let last: unknown;
    for (let i = 0; i < this.#endpoints.length; i++) {
      const endpoint = this.#endpoints[this.#current]!;
      try {
        const res = await fetch(endpoint + path, {
          method: "POST",
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
          client: this.client,
        });
        const text = await res.text();
        if (!res.ok) throw new Error(`etcd ${path} answered ${res.status}: ${text.slice(0, 200)}`);
        return JSON.parse(text);
      } catch (e) {
        last = e;
        this.#current = (this.#current + 1) % this.#endpoints.length;
      }
    }
    throw last instanceof Error ? last : new Error(String(last));
  }
}
