/**
 * Seeded inputs for the HTTP fuzzer: a PRNG wrapper, and the good, borderline and bad values of
 * every kind of field the broker reads (names, ids, durations, booleans, integers, JSON values).
 * Headers, bodies, Host values and methods are in fuzz_inputs.ts.
 */

import { prng } from "../_support/prng.ts";

/** Bytes backed by a plain ArrayBuffer (what fetch takes as a body). */
export type Bytes = Uint8Array<ArrayBuffer>;

/** A seeded random source (mulberry32 underneath) with the helpers the generators need. */
export class Rand {
  readonly #next: () => number;

  constructor(readonly seed: number) {
    this.#next = prng(seed);
  }

  /** A float in [0, 1). */
  float(): number {
    return this.#next();
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.#next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.#next() < p;
  }

  /** One element of a non-empty list. */
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }

  /** An independent stream, so a scenario's choices do not shift the main sequence. */
  fork(): Rand {
    return new Rand(this.int(2 ** 32));
  }

  /** n random bytes (any value, NUL and > 0x7f included). */
  bytes(n: number): Bytes {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }

  /** A string of n characters drawn from `alphabet`. */
  text(n: number, alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"): string {
    let s = "";
    for (let i = 0; i < n; i++) s += alphabet[this.int(alphabet.length)];
    return s;
  }
}

const NAME_CHARS = "ABCXYZabcxyz0189._-";

/** A valid name of exactly n characters (1–200 of `A-Z a-z 0-9 . _ -`, no leading dot, no ..). */
export function validName(prefix: string, n: number): string {
  return (prefix + "n".repeat(n)).slice(0, n);
}

/** Names at and just under the 200-character limit: their `.dlq` names are over it. */
export const LONG_TOPICS = [195, 196, 197, 198, 199, 200].map((n) => validName(`long${n}-`, n));

/** The valid topic names requests use: a small pool, so the topic count stays bounded. */
export const TOPICS = [
  "fz-a",
  "fz-b",
  "fz.c",
  "fz_d",
  "orders",
  "x",
  "0",
  "-",
  "__proto__",
  "constructor",
  "fz-a.dlq",
  ...LONG_TOPICS,
];

/** The valid group names requests use (the empty name is the default group). */
export const GROUPS = [
  "",
  "g1",
  "g2",
  "billing",
  "__proto__",
  "hasOwnProperty",
  validName("g", 200),
];

/** Names that must be refused with 400 invalid_name wherever they appear. */
export const BAD_NAMES = [
  "",
  ".",
  "..",
  ".a",
  ".dlq",
  "a..b",
  "a".repeat(201),
  "a".repeat(4096),
  `${LONG_TOPICS[5]}.dlq`,
  "fz-a.dlq..dlq",
  "a b",
  "a/b",
  "a\\b",
  "a?b",
  "a#b",
  "a:b",
  "a*",
  "a+b",
  "a%b",
  "ü",
  "日本",
  "😀",
  "a\u0000b",
  "a\nb",
  "\u202e",
  "a\ud800",
];

/** Percent sequences that are not valid escapes, or decode to something odd. */
export const BROKEN_ESCAPES = [
  "%",
  "%z",
  "%zz",
  "%2",
  "%%",
  "%E2%82",
  "%C0%AF",
  "%ff",
  "%00",
  "%2F",
  "%2e%2e",
  "%u0041",
  "%0d%0a",
];

/** A name from `pool`, or when `bad` one at or past 200 characters, malformed, or a `.dlq` name. */
export function name(r: Rand, pool: readonly string[], bad: boolean): string {
  if (!bad) return r.pick(pool);
  switch (r.int(5)) {
    case 0:
      return `${r.pick(pool)}.dlq`;
    case 1:
      return validName(r.text(3, NAME_CHARS), 199 + r.int(4));
    case 2:
      return r.pick(pool) + r.pick(BAD_NAMES);
    default:
      return r.pick(BAD_NAMES);
  }
}

/** Ids: a learned one (a real message), a well-formed unknown one, or junk. */
export function id(r: Rand, learned: readonly string[], bad: boolean): string {
  if (!bad && learned.length && r.chance(0.8)) return r.pick(learned);
  if (!bad) return "01890000-0000-7000-8000-000000000000";
  return r.pick([
    "",
    "x",
    "0".repeat(36),
    "01890000-0000-7000-8000-00000000000G",
    "01890000-0000-4000-8000-000000000000",
    (learned[0] ?? "01890000-0000-7000-8000-000000000000").toUpperCase(),
    "a".repeat(10_000),
    "../../etc/passwd",
    "ü",
    "__proto__",
    " ",
  ]);
}

/** Durations the contract accepts. */
export const GOOD_DURATIONS = ["0s", "1ms", "10ms", "250ms", "1s", "30s", "5m", "1h", "12h"];
/** Durations it refuses, or accepts only up to a route's maximum. */
export const BAD_DURATIONS = [
  "1e3s",
  "-1s",
  "999999999h",
  "999999999999h",
  "9999999999999ms",
  "1209600001ms",
  "336h",
  "14d",
  "1.5s",
  "s",
  "10",
  "",
  "30 s",
  " 30s",
  "0x10s",
  "１s",
  "NaN",
  "Infinity",
  "1S",
  "10sec",
  "1".repeat(400) + "s",
  "30s30s",
  "31s",
  "12h1ms",
  "0ms",
];

/** A duration string, good or bad. */
export function duration(r: Rand, bad: boolean): string {
  return r.pick(bad ? BAD_DURATIONS : GOOD_DURATIONS);
}

/** A lease length (1 ms – 12 h: visibility, touch's `by`), good or bad. */
export function lease(r: Rand, bad: boolean): string {
  if (!bad) return r.pick(GOOD_DURATIONS.slice(1));
  return r.pick(["0s", "0ms", "13h", "721m", "43200001ms", ...BAD_DURATIONS]);
}

/** Boolean query values, good or bad. */
export function bool(r: Rand, bad: boolean): string {
  if (!bad) return r.pick(["true", "false", "1", "0"]);
  return r.pick(["yes", "TRUE", "True", "2", "-1", "on", "tru", "null", "", "true ", "0x1", "1.0"]);
}

/** Integer query values around [min, max]; bad ones are out of range or not integers. */
export function integer(r: Rand, min: number, max: number, bad: boolean): string {
  if (!bad) return String(r.pick([min, max, min + r.int(max - min + 1)]));
  return r.pick([
    String(min - 1),
    String(max + 1),
    "-1",
    "1.5",
    "1e3",
    "999999999999",
    "9".repeat(400),
    "abc",
    "0x10",
    "+5",
    " 5",
    "١",
    "NaN",
  ]);
}

/** A JSON array or object nested `depth` deep, as text (shape picked by `r` unless given). */
export function deepJson(r: Rand, depth: number, array = r.chance(0.5)): string {
  return array
    ? "[".repeat(depth) + "1" + "]".repeat(depth)
    : '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

/** Nesting depths: the ~3,000 that once gave a 500, and around it. */
export const DEPTHS = [2, 64, 1000, 2999, 3000, 3001, 5000, 20_000];

/** JSON strings a field may choke on (as JSON text): a lone surrogate, NUL, 100,000 chars. */
const ODD_STRINGS = ['"\\ud800"', '"\\u0000"', '"a\\nb"', `"${"x".repeat(100_000)}"`, '""'];

/** A JSON value (as text) of the wrong type or shape for almost any field. */
export function jsonJunk(r: Rand): string {
  switch (r.int(6)) {
    case 0:
      return deepJson(r, r.pick(DEPTHS));
    case 1:
      return r.pick(["0", "-1", "1.5", "1e3", "1e308", "-0", "9007199254740993", "1e-400", "2"]);
    case 2:
      return r.pick(["true", "false", "null", "[]", "{}", "[1,2]", '{"a":1}', '[""]', "[null]"]);
    case 3:
      return JSON.stringify(r.pick([...BAD_NAMES, ...BAD_DURATIONS]));
    case 4:
      return r.pick(ODD_STRINGS);
    default:
      return JSON.stringify(r.pick(["true", "1", "high", "reject", "30s", "1000"]));
  }
}
