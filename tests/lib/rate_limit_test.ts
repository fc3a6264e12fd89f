/**
 * Per-key publish limits: buckets that hold a second of their rate, refill with the clock,
 * admit while not empty (a batch may overdraw), and say how long to wait.
 */

import { assertEquals } from "../_support/assert.ts";
import { type ApiKey, parseKeyFile } from "../../lib/auth.ts";
import { RateLimiter } from "../../lib/rate_limit.ts";

/** The key named `name` in `file`'s keys (a key of its own when none is). */
function named(keys: ApiKey[], name: string): ApiKey {
  return keys.find((k) => k.name === name) ?? parseKeyFile(`unlisted-${name} name=${name}`)[0]!;
}

function limiter(file: string) {
  let now = 0;
  const l = new RateLimiter(() => now);
  const keys = parseKeyFile(file);
  l.replace(keys);
  return { l, advance: (ms: number) => now += ms, k: (name: string) => named(keys, name) };
}

Deno.test("RateLimiter: a key gets a second of its rate at once, then its rate", () => {
  const { l, advance, k } = limiter("k name=app rate=10/s\n");
  for (let i = 0; i < 10; i++) assertEquals(l.admit(k("app"), 1, 100), 0, `message ${i}`);
  assertEquals(l.admit(k("app"), 1, 100), 1, "empty: retry as soon as a token is back");
  advance(100); // one token back
  assertEquals(l.admit(k("app"), 1, 100), 0);
  assertEquals(l.admit(k("app"), 1, 100) > 0, true);
  assertEquals(l.admit(k("other"), 1000, 1e9), 0, "a key without limits is never held");
});

Deno.test("RateLimiter: a batch overdraws once and waits it off; bytes count too", () => {
  const { l, advance, k } = limiter("k name=app rate=100/s bytes=1000/s\n");
  assertEquals(l.admit(k("app"), 500, 10), 0, "a batch past a second's worth goes through once");
  assertEquals(
    l.admit(k("app"), 1, 10),
    4_001,
    "then waits until the 400 taken on credit are back",
  );
  advance(4_001);
  assertEquals(l.admit(k("app"), 1, 5_000), 0);
  assertEquals(l.admit(k("app"), 1, 1), 4_001, "5,000 bytes on 1,000/s: the bytes decide now");
});

Deno.test("RateLimiter: a reload installs the new limits with full buckets", () => {
  // `k` finds the keys of before the reload, as a request under way does: by their digest.
  const { l, k } = limiter("a name=a rate=2/s\nb name=b\n");
  l.admit(k("a"), 2, 0);
  assertEquals(l.admit(k("a"), 1, 0) > 0, true);
  l.replace(parseKeyFile("a name=a rate=5/s\nb name=b bytes=10/s\n"));
  for (let i = 0; i < 5; i++) assertEquals(l.admit(k("a"), 1, 0), 0);
  assertEquals(l.admit(k("a"), 1, 0) > 0, true);
  assertEquals(l.admit(k("b"), 1, 10), 0);
  assertEquals(l.admit(k("b"), 1, 1) > 0, true, "b now limited by bytes");
});

Deno.test("RateLimiter: two limiters on one shared buffer draw from the same buckets", () => {
  const keys = parseKeyFile("k name=app rate=4/s\n");
  const k = (name: string) => named(keys, name);
  const shared = RateLimiter.buffer(keys, 0);
  const [a, b] = [new RateLimiter(() => 0), new RateLimiter(() => 0)];
  a.replace(keys, shared);
  b.replace(keys, shared);
  assertEquals([a.admit(k("app"), 1, 0), b.admit(k("app"), 1, 0), a.admit(k("app"), 1, 0)], [
    0,
    0,
    0,
  ]);
  assertEquals(b.admit(k("app"), 1, 0), 0);
  assertEquals(a.admit(k("app"), 1, 0) > 0, true, "four taken between them: empty for both");
  assertEquals(b.admit(k("app"), 1, 0) > 0, true);
});

Deno.test("RateLimiter: buckets are a key's own, whatever its name says", () => {
  // Start-up refuses two keys of one name (lib/auth.ts checkNames); the buckets hold anyway.
  const keys = parseKeyFile("slow name=same rate=1/s\nfree name=same\nfast name=same rate=1000/s");
  const l = new RateLimiter(() => 0);
  l.replace(keys);
  const [slow, free, fast] = keys as [ApiKey, ApiKey, ApiKey];
  assertEquals(l.admit(slow, 1, 0), 0);
  assertEquals(l.admit(slow, 1, 0) > 0, true, "the 1/s key is held");
  for (let i = 0; i < 100; i++) assertEquals(l.admit(free, 1, 0), 0, "the unlimited key never");
  for (let i = 0; i < 100; i++) assertEquals(l.admit(fast, 1, 0), 0, "nor the 1000/s key at 100");
});
