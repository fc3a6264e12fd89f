/**
 * Per-key publish limits: buckets that hold a second of their rate, refill with the clock,
 * admit while not empty (a batch may overdraw), and say how long to wait.
 */

import { assertEquals } from "../_support/assert.ts";
import { parseKeyFile } from "../../lib/auth.ts";
import { RateLimiter } from "../../lib/rate_limit.ts";

function limiter(file: string) {
  let now = 0;
  const l = new RateLimiter(() => now);
  l.replace(parseKeyFile(file));
  return { l, advance: (ms: number) => now += ms };
}

Deno.test("RateLimiter: a key gets a second of its rate at once, then its rate", () => {
  const { l, advance } = limiter("k name=app rate=10/s\n");
  for (let i = 0; i < 10; i++) assertEquals(l.admit("app", 1, 100), 0, `message ${i}`);
  assertEquals(l.admit("app", 1, 100), 1, "empty: retry as soon as a token is back");
  advance(100); // one token back
  assertEquals(l.admit("app", 1, 100), 0);
  assertEquals(l.admit("app", 1, 100) > 0, true);
  assertEquals(l.admit("other", 1000, 1e9), 0, "a key without limits is never held");
});

Deno.test("RateLimiter: a batch overdraws once and waits it off; bytes count too", () => {
  const { l, advance } = limiter("k name=app rate=100/s bytes=1000/s\n");
  assertEquals(l.admit("app", 500, 10), 0, "a batch past a second's worth goes through once");
  assertEquals(l.admit("app", 1, 10), 4_001, "then waits until the 400 taken on credit are back");
  advance(4_001);
  assertEquals(l.admit("app", 1, 5_000), 0);
  assertEquals(l.admit("app", 1, 1), 4_001, "5,000 bytes on 1,000/s: the bytes decide now");
});

Deno.test("RateLimiter: a reload installs the new limits with full buckets", () => {
  const { l } = limiter("a name=a rate=2/s\n");
  l.admit("a", 2, 0);
  assertEquals(l.admit("a", 1, 0) > 0, true);
  l.replace(parseKeyFile("a name=a rate=5/s\nb name=b bytes=10/s\n"));
  for (let i = 0; i < 5; i++) assertEquals(l.admit("a", 1, 0), 0);
  assertEquals(l.admit("a", 1, 0) > 0, true);
  assertEquals(l.admit("b", 1, 10), 0);
  assertEquals(l.admit("b", 1, 1) > 0, true, "b now limited by bytes");
});

Deno.test("RateLimiter: two limiters on one shared buffer draw from the same buckets", () => {
  const keys = parseKeyFile("k name=app rate=4/s\n");
  const shared = RateLimiter.buffer(keys, 0);
  const [a, b] = [new RateLimiter(() => 0), new RateLimiter(() => 0)];
  a.replace(keys, shared);
  b.replace(keys, shared);
  assertEquals([a.admit("app", 1, 0), b.admit("app", 1, 0), a.admit("app", 1, 0)], [0, 0, 0]);
  assertEquals(b.admit("app", 1, 0), 0);
  assertEquals(a.admit("app", 1, 0) > 0, true, "four taken between them: empty for both");
  assertEquals(b.admit("app", 1, 0) > 0, true);
});
