/**
 * @module API keys: parsing `BROKER_API_KEYS` and the keys file, and the key ring a request's
 * key is checked against. Pure: main.ts reads the file, routes/auth.ts reads the request.
 * Parse errors name the setting and the entry's position, never the key.
 */

import { ConfigError } from "./config.ts";

/** A scope a key may carry; a route needing `public` needs no key. */
export type KeyScope = "publish" | "consume" | "admin";

/** Bit of each scope in a key's scope mask. */
export const SCOPE_BITS: Readonly<Record<KeyScope, number>> = { publish: 1, consume: 2, admin: 4 };
/** The mask of a key listed without scopes: every scope. */
export const ALL_SCOPES = 7;
/** Longer presented keys are refused before any comparison, so compare time stays bounded. */
export const MAX_KEY_LENGTH = 512;

/** One configured key and the scopes it grants, as a SCOPE_BITS mask. */
export interface ApiKey {
  key: string;
  scopes: number;
}

// Printable ASCII without the separators `,` and `:`, so every key can be written in both forms.
const KEY_CHARS = /^[\x21-\x2b\x2d-\x39\x3b-\x7e]+$/;

function parseEntry(entry: string, where: string): ApiKey {
  const colon = entry.indexOf(":");
  const key = colon < 0 ? entry : entry.slice(0, colon).trim();
  if (!KEY_CHARS.test(key) || key.length > MAX_KEY_LENGTH) {
    throw new ConfigError(
      `${where}: a key is 1-${MAX_KEY_LENGTH} printable characters without spaces, "," or ":"`,
    );
  }
  if (Object.hasOwn(SCOPE_BITS, key)) {
    // `k:publish,consume` in BROKER_API_KEYS would otherwise make "consume" a key with every scope.
    throw new ConfigError(
      `${where}: "${key}" is a scope, not a key; join scopes with + (k:publish+consume)`,
    );
  }
  if (colon < 0) return { key, scopes: ALL_SCOPES };
  let scopes = 0;
  for (const raw of entry.slice(colon + 1).split(/[+,]/)) {
    const name = raw.trim();
    if (!Object.hasOwn(SCOPE_BITS, name)) {
      // Echo a typo like "publsh", but nothing that could be part of a key ("abc:def").
      const what = /^[a-z]{0,16}$/.test(name) ? `"${name}"` : "(not shown)";
      throw new ConfigError(
        `${where}: unknown scope ${what} (expected publish, consume or admin)`,
      );
    }
    scopes |= SCOPE_BITS[name as KeyScope];
  }
  return { key, scopes };
}

/** Parses `BROKER_API_KEYS`: comma-separated keys, scopes after a colon joined by `+`. */
export function parseKeyList(value: string, setting = "BROKER_API_KEYS"): ApiKey[] {
  const out: ApiKey[] = [];
  value.split(",").forEach((entry, i) => {
    if (entry.trim()) out.push(parseEntry(entry.trim(), `${setting} entry ${i + 1}`));
  });
  return out;
}

/** Parses a keys file: one `key[:scope,scope]` (or `+`) per line; `#` comments, blank lines. */
export function parseKeyFile(text: string, setting = "BROKER_API_KEYS_FILE"): ApiKey[] {
  const out: ApiKey[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const entry = line.trim();
    if (entry && !entry.startsWith("#")) out.push(parseEntry(entry, `${setting} line ${i + 1}`));
  });
  return out;
}

/**
 * Compares a presented key with a configured one without an early exit: the work depends on
 * the presented length only, so timing tells a client nothing about how much of a key matched.
 */
function sameKey(given: string, key: string): boolean {
  let diff = given.length ^ key.length;
  for (let i = 0; i < given.length; i++) diff |= given.charCodeAt(i) ^ key.charCodeAt(i);
  return diff === 0;
}

/** The configured keys; `replace` swaps them at once (SIGHUP). */
export class KeyRing {
  #keys: readonly ApiKey[] = [];

  constructor(keys: ApiKey[] = []) {
    this.replace(keys);
  }

  /** Installs a new key list; a key listed twice gets the union of its scopes. */
  replace(keys: ApiKey[]): void {
    const merged = new Map<string, number>();
    for (const k of keys) merged.set(k.key, (merged.get(k.key) ?? 0) | k.scopes);
    this.#keys = [...merged].map(([key, scopes]) => ({ key, scopes }));
  }

  /** How many distinct keys are configured. */
  get size(): number {
    return this.#keys.length;
  }

  /**
   * The scope mask of a presented key, 0 when it matches none. Every configured key is compared,
   * whichever matches, so the time taken does not say which key (or how much of one) matched.
   */
  scopesOf(given: string): number {
    if (given.length === 0 || given.length > MAX_KEY_LENGTH) return 0;
    let scopes = 0;
    for (const k of this.#keys) scopes |= sameKey(given, k.key) ? k.scopes : 0;
    return scopes;
  }
}
