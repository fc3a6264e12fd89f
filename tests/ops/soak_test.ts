/**
 * The soak campaign's CI run: 16 s of the soak load (tests/ops/soak.ts) on a child broker, judged
 * on leaks and errors rather than throughput, then one plain publish → consume → ack round trip.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { runSoak, type SoakReport, verdict } from "./soak.ts";

const MIB = 1024 * 1024;
/** Generous: an idle broker is ~65 MiB and this load holds a few hundred messages at most. */
const MAX_RSS_BYTES = 512 * MIB;

/** Publishes one message to a fresh topic, consumes it and acks it; returns what it saw. */
async function roundTrip(url: string): Promise<unknown[]> {
  const pub = await fetch(`${url}/publish/soak-final`, { method: "POST", body: "round trip" });
  const { id } = await pub.json();
  const got = await fetch(`${url}/consume/soak-final`);
  const msg = await got.json();
  const ack = await fetch(`${url}/ack/soak-final/${id}`, { method: "POST" });
  await ack.body?.cancel();
  return [pub.status, got.status, msg.id === id, msg.payload_text, ack.status];
}

function describe(r: SoakReport): string {
  const mib = (b: number) => (b / MIB).toFixed(1);
  return `published ${r.published}, acked ${r.acked}; RSS MiB start ${mib(r.rss.start)}, ` +
    `max ${mib(r.rss.max)}, end ${mib(r.rss.end)}; fds start ${r.fds.start}, ` +
    `max ${r.fds.max}, end ${r.fds.end}; statuses ${JSON.stringify(r.statuses)}`;
}

Deno.test("soak: 16 s of mixed load leave no 5xx, no leaked fd, bounded RSS, a working broker", async () => {
  let seen: unknown[] = [];
  const report = await runSoak(
    { durationMs: 16_000, ratePerSec: 400, sampleMs: 2_000, topics: 3, payloadBytes: 1024 },
    { beforeKill: async (url) => void (seen = await roundTrip(url)) },
  );
  console.log(describe(report));
  assertEquals(verdict(report, { rssGrowth: false, maxRssBytes: MAX_RSS_BYTES }), []);
  assert(report.published > 0, "the load published nothing");
  const settled = report.acked + report.deadLettered;
  assertEquals(
    settled,
    report.published,
    "a published message neither acked nor dead-lettered",
  );
  assertEquals(seen, [201, 200, true, "round trip", 204]);
});
