/**
 * @module API keys: parsing `BROKER_API_KEYS` and the keys file, and the key ring a request's
 * key is checked against. Pure: main.ts reads the file, routes/auth.ts reads the request.
 * Parse errors name the setting and the entry's position, never the key. Keys are kept and
 * compared as SHA-256 digests, so a keys file may hold `sha256:<hex>` entries instead of keys.
 */

import { createHash } from "node:crypto";
import { byteSize, ConfigError } from "./config.ts";
import { HASHED_PREFIX, hexOf } from "../protocol/key_hash.ts";

/** A scope a key may carry; a route needing `public` needs no key. */
export type KeyScope = "publish" | "consume" | "admin" | "metrics";

/** Bit of each scope in a key's scope mask. */
export const SCOPE_BITS: Readonly<Record<KeyScope, number>> = {
  publish: 1,
  consume: 2,
  admin: 4,
  metrics: 8,
};
/** What listing a scope grants: `admin` reads the metrics too (docs/operating.md, scopes). */
const GRANTS: Readonly<Record<KeyScope, number>> = {
  publish: SCOPE_BITS.publish,
  consume: SCOPE_BITS.consume,
  admin: SCOPE_BITS.admin | SCOPE_BITS.metrics,
  metrics: SCOPE_BITS.metrics,
};
/** The mask of a key listed without scopes: every scope. */
export const ALL_SCOPES = 15;
/** Longer presented keys are refused before any comparison, so compare time stays bounded. */
export const MAX_KEY_LENGTH = 512;

/** What a key may publish (the keys file's `rate=` and `bytes=`): token buckets per key. */
export interface KeyLimits {
  /** Messages a second, and as many at once. */
  messagesPerSecond?: number;
  /** Payload bytes a second, and as many at once. */
  bytesPerSecond?: number;
}

/**
 * One configured key: its SHA-256 (a plain entry is hashed as it is read, so the ring holds no
 * key), the scopes it grants as a SCOPE_BITS mask, the name logs and metrics show, its limits.
 */
export interface ApiKey {
  digest: Uint8Array;
  scopes: number;
  name: string;
  limits: KeyLimits;
  /** The key itself, for an entry written plain (a follower presents it to its leader). */
  key?: string;
  /** Where it was listed (`BROKER_API_KEYS_FILE line 3`), for errors that name an entry. */
  source?: string;
}

// Printable ASCII without the separators `,` and `:`, so every key can be written in both forms.
const KEY_CHARS = /^[\x21-\x2b\x2d-\x39\x3b-\x7e]+$/;
const HASHED = /^sha256:([0-9a-fA-F]{64})$/;
const NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** The SHA-256 of a key as presented (its UTF-8 bytes). */
function keyDigest(key: string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(key).digest());
}

function fromHex(h: string): Uint8Array {
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** A scope list after the key's colon: names joined by `+` (or `,` in a keys file). */
function parseScopes(list: string, where: string): number {
  let scopes = 0;
  for (const raw of list.split(/[+,]/)) {
    const name = raw.trim();
    if (!Object.hasOwn(SCOPE_BITS, name)) {
      // Echo a typo like "publsh", but nothing that could be part of a key ("abc:def").
      const what = /^[a-z]{0,16}$/.test(name) ? `"${name}"` : "(not shown)";
      throw new ConfigError(
        `${where}: unknown scope ${what} (expected publish, consume, admin or metrics)`,
      );
    }
    scopes |= GRANTS[name as KeyScope];
  }
  return scopes;
}

/** Whether `text` is scope names joined by `+` (`consume+admin`), as no key should be. */
function isScopeList(text: string): boolean {
  // `Consume+Admin` too: scope names are lower-case, but a key that spells them is a mistake.
  return text.split("+").every((s) => Object.hasOwn(SCOPE_BITS, s.toLowerCase()));
}

/** `rate=100/s`, `bytes=1MiB/s`, `name=billing` after the key, separated by spaces. */
function parseOption(option: string, where: string, into: ApiKey): void {
  const eq = option.indexOf("=");
  const field = eq < 0 ? option : option.slice(0, eq);
  const value = eq < 0 ? "" : option.slice(eq + 1);
  if (field === "name") {
    if (!NAME.test(value)) {
      throw new ConfigError(`${where}: name= takes 1-64 of A-Z a-z 0-9 . _ -`);
    }
    into.name = value;
  } else if (field === "rate") {
    const m = /^(\d{1,9}(?:\.\d{1,6})?)\/s$/.exec(value);
    if (!m || Number(m[1]) <= 0) {
      throw new ConfigError(`${where}: rate= takes messages a second, like rate=100/s`);
    }
    into.limits.messagesPerSecond = Number(m[1]);
  } else if (field === "bytes") {
    const n = value.endsWith("/s") ? byteSize(value.slice(0, -2)) : undefined;
    if (n === undefined) {
      throw new ConfigError(`${where}: bytes= takes a size a second, like bytes=1MiB/s`);
    }
    into.limits.bytesPerSecond = n;
  } else if (eq < 0) {
    // Most likely a key with a space in it: show none of it.
    throw new ConfigError(
      `${where}: a key is 1-${MAX_KEY_LENGTH} printable characters without spaces, "," or ":"; ` +
        "options after it are name=, rate= and bytes=",
    );
  } else {
    throw new ConfigError(`${where}: unknown option (expected name=, rate= or bytes=)`);
  }
}

/** What to tell an entry made of scope names only (`consume+admin`); it holds no key to hide. */
type ScopeHint = (scopes: string) => string;

function parseEntry(entry: string, where: string, scopeHint: ScopeHint): ApiKey {
  const [first, ...options] = entry.split(/\s+/);
  const token = first!;
  let digest: Uint8Array;
  let key: string | undefined;
  let scopes = ALL_SCOPES;
  if (token.startsWith(HASHED_PREFIX)) {
    const colon = token.indexOf(":", HASHED_PREFIX.length);
    const hashed = HASHED.exec(colon < 0 ? token : token.slice(0, colon));
    if (!hashed) {
      throw new ConfigError(
        `${where}: a sha256: entry is 64 hex digits (ferry key hash makes one)`,
      );
    }
    digest = fromHex(hashed[1]!);
    if (colon >= 0) scopes = parseScopes(token.slice(colon + 1), where);
  } else {
    const colon = token.indexOf(":");
    key = colon < 0 ? token : token.slice(0, colon);
    if (!KEY_CHARS.test(key) || key.length > MAX_KEY_LENGTH) {
      throw new ConfigError(
        `${where}: a key is 1-${MAX_KEY_LENGTH} printable characters without spaces, "," or ":"`,
      );
    }
    if (isScopeList(key)) {
      // `k:publish,consume+admin` in BROKER_API_KEYS would otherwise make "consume+admin" a key.
      throw new ConfigError(
        `${where}: "${key}" looks like scopes, not a key: ${scopeHint(key.toLowerCase())}`,
      );
    }
    digest = keyDigest(key);
    if (colon >= 0) scopes = parseScopes(token.slice(colon + 1), where);
  }
  // Named after its hash by default: the same for a key written plain or hashed, and no secret.
  const out: ApiKey = {
    digest,
    scopes,
    name: `key-${hexOf(digest).slice(0, 8)}`,
    limits: {},
    source: where,
  };
  if (key !== undefined) out.key = key;
  for (const option of options) parseOption(option, where, out);
  return out;
}

/**
 * Parses `BROKER_API_KEYS`: comma-separated entries, each a key (or `sha256:<hex>`), scopes
 * after a colon joined by `+`, then options (`name=`, `rate=`, `bytes=`) after spaces.
 */
export function parseKeyList(value: string, setting = "BROKER_API_KEYS"): ApiKey[] {
  const out: ApiKey[] = [];
  const entries = value.split(",");
  entries.forEach((entry, i) => {
    // `k:publish,consume+admin`: the scopes before the comma belong to the same key.
    const before = /:([a-z+]+)$/.exec(entries[i - 1]?.trim().split(/\s+/)[0] ?? "")?.[1];
    const hint: ScopeHint = (scopes) =>
      `in ${setting} a comma starts a new key, so join a key's scopes with + ` +
      `(key:${before && isScopeList(before) ? `${before}+` : ""}${scopes})`;
    if (entry.trim()) out.push(parseEntry(entry.trim(), `${setting} entry ${i + 1}`, hint));
  });
  return out;
}

/** Parses a keys file: one entry per line (scopes joined by `,` or `+`); `#` comments, blanks. */
export function parseKeyFile(text: string, setting = "BROKER_API_KEYS_FILE"): ApiKey[] {
  const out: ApiKey[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const entry = line.trim();
    const hint: ScopeHint = (scopes) =>
      `write the key first, its scopes after a colon (key:${scopes})`;
    if (entry && !entry.startsWith("#")) {
      out.push(parseEntry(entry, `${setting} line ${i + 1}`, hint));
    }
  });
  return out;
}

/**
 * Refuses two different keys of one name, so that a name (`name=`, or the default `key-` and 8 hex
 * digits of the digest) names one key in logs, metrics and the audit log. The same key listed
 * twice under one name is one key.
 */
export function checkNames(keys: readonly ApiKey[]): void {
  const byName = new Map<string, ApiKey>();
  for (const k of keys) {
    const had = byName.get(k.name);
    if (had && !sameDigest(had.digest, k.digest)) {
      throw new ConfigError(
        `${k.source ?? "an API key"}: the name "${k.name}" is taken by another key ` +
          `(${had.source ?? "listed before"}); give each key a name= of its own`,
      );
    }
    byName.set(k.name, k);
  }
}

/** Whether two digests are equal, with no early exit. */
function sameDigest(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Presented keys whose digests are remembered; past it the memory starts over. */
const REMEMBERED_DIGESTS = 1024;

/** The configured keys; `replace` swaps them at once (SIGHUP). */
export class KeyRing {
  #keys: readonly ApiKey[] = [];
  /**
   * The digest of each key presented lately, valid or not: hashing costs ~2 µs, about 5 % of a
   * publish, and clients present the same key on every request. A hit says only that the same
   * string was presented before, never whether it is a key.
   */
  readonly #digests = new Map<string, Uint8Array>();

  constructor(keys: ApiKey[] = []) {
    this.replace(keys);
  }

  /**
   * Installs a new key list; a key listed twice (plain or hashed) gets the union of its scopes,
   * and the name and limits of its first entry.
   */
  replace(keys: ApiKey[]): void {
    const merged: ApiKey[] = [];
    for (const k of keys) {
      const had = merged.find((m) => sameDigest(m.digest, k.digest));
      if (had) had.scopes |= k.scopes;
      else merged.push({ ...k, limits: { ...k.limits } });
    }
    this.#keys = merged;
  }

  /** How many distinct keys are configured. */
  get size(): number {
    return this.#keys.length;
  }

  /** The configured keys (for the rate limiter; digests, never keys, leave through logs). */
  get keys(): readonly ApiKey[] {
    return this.#keys;
  }

  /**
   * The configured key a presented one is, or undefined. The presented key is hashed and every
   * configured digest compared in full, whichever matches, so the time taken does not say which
   * key (or how much of one) matched.
   */
  find(given: string): ApiKey | undefined {
    if (given.length === 0 || given.length > MAX_KEY_LENGTH) return undefined;
    let digest = this.#digests.get(given);
    if (!digest) {
      if (this.#digests.size >= REMEMBERED_DIGESTS) this.#digests.clear();
      this.#digests.set(given, digest = keyDigest(given));
    }
    let found: ApiKey | undefined;
    for (const k of this.#keys) {
      const same = sameDigest(digest, k.digest);
      found = same ? k : found;
    }
    return found;
  }

  /** The scope mask of a presented key, 0 when it matches none. */
  scopesOf(given: string): number {
    return this.find(given)?.scopes ?? 0;
  }
}
