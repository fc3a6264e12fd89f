/**
 * One key held to its rate while another publishes freely, with two real clients (the
 * TypeScript client, each its own process, waiting out 429s as an application does) against a
 * real broker process. How much the calm key's latency moves is a benchmark row (section
 * `security`, row 14b); here, what each key was let through.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { start, stop, withDataDir } from "../_support/child.ts";

const CLIENT = new URL("../bench/fair_client.ts", import.meta.url).pathname;

/** What a client printed: its counts and latencies. */
interface Report {
  published: number;
  limited: number;
  refused: number;
}

async function client(args: string[]): Promise<Report> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLIENT, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout).trim();
  assert(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(text.split("\n").at(-1)!);
}

Deno.test("fairness: a key past its rate is held to it; another key publishes and is never refused", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, {
      BROKER_API_KEYS: "hammer-key:publish name=hammer rate=50/s,calm-key:publish+admin name=calm",
    });
    const seconds = 3;
    const [hammer, calm] = await Promise.all([
      client(["hammer", b.url, "hammer-key", String(seconds), "16"]),
      client(["measure", b.url, "calm-key", String(seconds)]),
    ]);
    console.log(`hammer ${JSON.stringify(hammer)}; calm ${JSON.stringify(calm)}`);
    assertEquals(calm.refused, 0, "the calm key is never refused");
    assert(calm.published > 0);
    // A second's burst, then 50/s; the hammer's last waits may end up to ~5 s past its run.
    assert(
      hammer.published > 0 && hammer.published <= 50 * (1 + seconds + 5),
      `${hammer.published}`,
    );
    const metrics = await (await fetch(`${b.url}/metrics`, {
      headers: { authorization: "Bearer calm-key" },
    })).text();
    const limited = metrics.split("\n").filter((l) => l.startsWith("ferry_rate_limited_total{"));
    assertEquals(limited.map((l) => l.split(" ")[0]), ['ferry_rate_limited_total{key="hammer"}']);
    assert(Number(limited[0]!.split(" ")[1]) > 0);
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});
