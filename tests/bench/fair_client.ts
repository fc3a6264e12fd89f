/**
 * The two clients of the per-key fairness row (section `security`, row 14b) and its test, each
 * its own process so neither one's work delays the other's timing. Both are the TypeScript
 * client, which waits out a 429 for its `Retry-After` as an application would.
 *
 *   deno run -A tests/bench/fair_client.ts hammer URL KEY SECONDS LOOPS
 *     LOOPS publish loops of 1 KiB as fast as they are answered, for SECONDS; prints
 *     {"published":n,"limited":n} (`limited`: calls that still failed with 429 rate_limited).
 *   deno run -A tests/bench/fair_client.ts measure URL KEY SECONDS
 *     one publish at a time for SECONDS; prints {"published":n,"refused":n,"p50_ms","p99_ms"}.
 */

import { Ferry, FerryError } from "../../clients/ts/mod.ts";

const [mode, url, key, seconds, loops] = Deno.args;
const until = performance.now() + Number(seconds) * 1000;
const payload = "x".repeat(1024);
const ferry = new Ferry({ url, apiKey: key, retries: 1_000 });

if (mode === "hammer") {
  let published = 0, limited = 0;
  await Promise.all(Array.from({ length: Number(loops) }, async () => {
    while (performance.now() < until) {
      try {
        await ferry.publish("fair-hammer", payload, { timeoutMs: 10_000 });
        published++;
      } catch (e) {
        if (e instanceof FerryError && e.code === "rate_limited") limited++;
        else throw e;
      }
    }
  }));
  console.log(JSON.stringify({ published, limited }));
} else {
  const took: number[] = [];
  let refused = 0;
  const once = new Ferry({ url, apiKey: key, retries: 0 });
  while (performance.now() < until) {
    const t0 = performance.now();
    try {
      await once.publish("fair-measure", payload);
      took.push(performance.now() - t0);
    } catch {
      refused++;
    }
  }
  took.sort((a, b) => a - b);
  const at = (q: number) => took[Math.min(took.length - 1, Math.floor(q * took.length))] ?? NaN;
  console.log(
    JSON.stringify({ published: took.length, refused, p50_ms: at(0.5), p99_ms: at(0.99) }),
  );
}
