/**
 * @module Sections `rss` (row 5) and `large` (rows 7): the broker's RSS holding 100,000 × 1 KiB
 * (and a second `--inspect` broker's JS heap after a forced GC), RSS holding 2 MiB payloads kept
 * in the WAL file, and auto-ack drains of 256 KiB messages read from disk and from memory.
 */

import { int, log } from "../harness/format.ts";
import { forceGc, vmRss } from "../harness/memory.ts";
import { KIB, MIB, type Options, type Plan, sleep } from "../harness/plan.ts";
import { fill } from "../harness/probes.ts";
import { withBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

/** RSS after a fill of 1 KiB messages; JS heap of a second broker after a forced GC. */
export async function rss(o: Options, p: Plan): Promise<void> {
  const payload = p.rssCount * KIB;
  const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;
  const maxQueue = Math.max(200_000, p.rssCount * 2);
  // As `deno task start` runs it: an --inspect broker held 24–30 MiB more one second after the
  // fill (and 6 MiB more idle), so the forced GC below runs on a second broker of its own.
  const seen = await withBroker(o, maxQueue, async (b) => {
    await sleep(500);
    const idle = await vmRss(b.pid);
    await fill(b.url, "rss", p.rssCount, KIB);
    const first = await vmRss(b.pid);
    await sleep(1000);
    return { idle, first, settled: await vmRss(b.pid) };
  });
  let gcNote = "";
  await withBroker(o, maxQueue, async (b) => {
    if (!b.inspector) return void (gcNote = "no inspector: no forced GC");
    await fill(b.url, "rss", p.rssCount, KIB);
    try {
      const heap = await forceGc(b.inspector);
      await sleep(200);
      const after = await vmRss(b.pid);
      gcNote =
        `a broker with --inspect after a forced full GC ${mib(after.rss)} (${
          (after.rss / payload).toFixed(2)
        } ×), JS heap ${mib(heap.before.usedSize)} → ${mib(heap.after.usedSize)} used` +
        ` (${int((heap.after.usedSize) / p.rssCount)} B/message)` +
        (heap.after.backingStorageSize !== undefined
          ? `, ArrayBuffers ${mib(heap.after.backingStorageSize)}`
          : "");
    } catch (e) {
      gcNote = `forced GC failed: ${(e as Error).message}`;
    }
  }, ["--inspect=127.0.0.1:0"]);
  const { idle, first, settled } = seen;
  const ratio = settled.rss / payload;
  log(`rss: ${mib(settled.rss)} (${ratio.toFixed(2)} ×)`);
  row({
    section: "5",
    measure: `RSS holding ${int(p.rssCount)} × 1 KiB`,
    result: mib(settled.rss),
    notes: [
      `${ratio.toFixed(2)} × payload, read 1 s after the fill`,
      `idle ${mib(idle.rss)}, growth ${((settled.rss - idle.rss) / payload).toFixed(2)} × payload`,
      `right after fill ${mib(first.rss)}, peak ${mib(settled.hwm)}`,
      gcNote,
    ].join("; "),
    target: "≤ 1.6 × payload",
    status: verdict(ratio <= 1.6),
  });
}

/** Takes every message of `topic` with auto-ack, `conns` loops of `limit`; messages per second. */
async function autoAckDrain(url: string, topic: string, count: number, limit: number) {
  let taken = 0;
  const t0 = performance.now();
  const loop = async () => {
    while (taken < count) {
      const res = await fetch(`${url}/consume/${topic}?limit=${limit}&auto_ack=true`);
      const text = await res.text();
      if (res.status === 404) continue;
      if (res.status !== 200) {
        throw new Error(`consume answered ${res.status}: ${text.slice(0, 200)}`);
      }
      taken += text.split('"retry_count"').length - 1;
    }
  };
  await Promise.all(Array.from({ length: 4 }, loop));
  return taken / ((performance.now() - t0) / 1000);
}

/** RSS holding 2 MiB payloads; 256 KiB drains from disk and from memory. */
export async function large(o: Options, p: Plan): Promise<void> {
  const mib = (n: number) => `${(n / MIB).toFixed(1)} MiB`;
  await withBroker(o, Math.max(200_000, p.largeCount * 2), async (b) => {
    await sleep(500);
    const idle = await vmRss(b.pid);
    const fillMs = await fill(b.url, "large", p.largeCount, 2 * MIB);
    await sleep(1000);
    const settled = await vmRss(b.pid);
    // The request bodies of 64 connections are garbage V8 has not collected yet: collect it.
    if (b.inspector) await forceGc(b.inspector);
    await sleep(1000);
    const held = await vmRss(b.pid);
    const perMessage = (held.rss - idle.rss) / p.largeCount;
    const share = (held.rss - idle.rss) / (p.largeCount * 2 * MIB);
    log(`large: ${mib(held.rss)} holding ${int(p.largeCount)} × 2 MiB`);
    row({
      section: "7a",
      measure: `RSS holding ${int(p.largeCount)} × 2 MiB (payloads in the WAL file)`,
      result: mib(held.rss),
      notes: `after a forced GC; idle ${mib(idle.rss)}, ${int(perMessage)} B per message held ` +
        `(${(share * 100).toFixed(2)} % of the payload); ` +
        `1 s after the fill ${mib(settled.rss)}, peak ${mib(held.hwm)}; ` +
        `${(p.largeCount * 2 / 1024).toFixed(1)} GiB published in ${(fillMs / 1000).toFixed(1)} s`,
      target: "growth ≤ 1 % of the payload",
      status: verdict(share <= 0.01),
    });
  }, ["--inspect=127.0.0.1:0"]);
  const rates: Record<string, number> = {};
  for (const [where, min] of [["disk", "64KiB"], ["memory", "4MiB"]] as const) {
    await withBroker(
      o,
      200_000,
      async (b) => {
        await fill(b.url, "k", p.diskCount, 256 * KIB);
        rates[where] = await autoAckDrain(b.url, "k", p.diskCount, 16);
        log(`large: 256 KiB from ${where}: ${int(rates[where]!)} msg/s`);
      },
      [],
      ["--disk-payload-min", min],
    );
  }
  for (const where of ["disk", "memory"] as const) {
    row({
      section: "7b",
      measure: `consume limit=16 + auto_ack of 256 KiB messages from ${where}, msg/s`,
      conns: "4",
      result: int(rates[where]!),
      notes: `${int(p.diskCount)} messages, ${(rates[where]! / 4).toFixed(0)} MiB/s` +
        (where === "disk" ? `; ${(rates.disk! / rates.memory! * 100).toFixed(0)} % of memory` : ""),
    });
  }
}
