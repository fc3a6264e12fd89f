/**
 * @module The event streams (SSE) and WebSockets open under each API key, so that a key reload
 * (SIGHUP) ends those whose key is gone or no longer grants the scope they were opened with
 * (docs/security.md "Rotating keys"). Pure: a route adds an `end` function, and the runtime calls
 * `revoke` with the new keys once they are installed. A key is known by its digest, never by its
 * name or the key itself.
 */

import { type ApiKey, type KeyScope, SCOPE_BITS } from "./auth.ts";
import { hexOf } from "../protocol/key_hash.ts";

/** One open stream or socket: the key it was opened with, the scope its route needed, its end. */
export interface OpenStream {
  digest: Uint8Array;
  scope: KeyScope;
  /** Ends the stream or socket, telling its reader `reason`; called at most once. */
  end(reason: Revoked): void;
}

/** Why a stream was ended: its key is gone (401), or lacks its scope now (403). */
export interface Revoked {
  code: "unauthorized" | "forbidden";
  detail: string;
}

/** The streams and sockets open under API keys, in one process (or worker). */
export class OpenStreams {
  readonly #open = new Set<OpenStream>();

  /** Registers an open stream; returns the function that forgets it once it ends by itself. */
  add(stream: OpenStream): () => void {
    this.#open.add(stream);
    return () => this.#open.delete(stream);
  }

  /** How many are open. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Ends every stream whose key is not among `keys`, or whose key no longer grants the scope it
   * was opened with; returns how many it ended.
   */
  revoke(keys: readonly ApiKey[]): number {
    const scopes = new Map<string, number>();
    for (const k of keys) {
      const hex = hexOf(k.digest);
      scopes.set(hex, (scopes.get(hex) ?? 0) | k.scopes);
    }
    let ended = 0;
    for (const s of [...this.#open]) {
      const granted = scopes.get(hexOf(s.digest));
      let why: Revoked;
      if (granted === undefined) {
        why = { code: "unauthorized", detail: "API key revoked" };
      } else if ((granted & SCOPE_BITS[s.scope]) === 0) {
        why = { code: "forbidden", detail: `API key no longer has the "${s.scope}" scope` };
      } else continue;
      this.#open.delete(s);
      ended++;
      s.end(why);
    }
    return ended;
  }
}
