/**
 * @module Readings of a running broker and its data dir: topic depth from GET /api/stats, a
 * fill to an exact depth, the fsync histogram of GET /metrics and its note for a row, and the
 * bytes (and zero-filled WAL tails) of a data dir.
 */

import { int } from "./format.ts";
import { FILL_STALL_MS, join } from "./plan.ts";
import { wrkUntil } from "./wrk.ts";

/** A topic's counts in GET /api/stats. */
export interface TopicStats {
  depth: number;
  in_flight: number;
}

/** The counts of `topic` (zeros when the broker does not know it). */
export async function topicStats(url: string, topic: string): Promise<TopicStats> {
  const res = await fetch(`${url}/api/stats`);
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET /api/stats answered ${res.status}`);
  }
  const s = await res.json() as { topics?: Record<string, TopicStats> };
  return s.topics?.[topic] ?? { depth: 0, in_flight: 0 };
}

/** Publishes exactly `count` messages of `size` bytes to `topic` with wrk; resolves when held. */
export async function fill(
  url: string,
  topic: string,
  count: number,
  size: number,
): Promise<number> {
  const t0 = performance.now();
  let depth = 0, lastChange = t0;
  await wrkUntil(
    {
      script: "fill.lua",
      url: `${url}/publish/${topic}`,
      threads: 1,
      conns: 64,
      seconds: 600,
      args: [String(size), String(count)],
    },
    async () => {
      const d = (await topicStats(url, topic)).depth;
      if (d !== depth) [depth, lastChange] = [d, performance.now()];
      return depth >= count || performance.now() - lastChange > FILL_STALL_MS;
    },
  );
  const held = (await topicStats(url, topic)).depth;
  if (held !== count) throw new Error(`fill of ${topic}: broker holds ${held}, wanted ${count}`);
  return performance.now() - t0;
}

/** The broker's ferry_wal_fsync_seconds histogram: cumulative counts by upper bound. */
export interface FsyncHistogram {
  buckets: Map<string, number>;
  sum: number;
  count: number;
}

/** Scrapes GET /metrics; undefined when it cannot. */
export async function fsyncHistogram(url: string): Promise<FsyncHistogram | undefined> {
  try {
    const res = await fetch(`${url}/metrics`);
    const text = await res.text();
    if (!res.ok) return undefined;
    const buckets = new Map<string, number>();
    let sum = NaN, count = NaN;
    for (const line of text.split("\n")) {
      const m = /^ferry_wal_fsync_seconds_(bucket\{le="([^"]+)"\}|sum|count) (\S+)$/.exec(line);
      if (!m) continue;
      if (m[2] !== undefined) buckets.set(m[2], Number(m[3]));
      else if (m[1] === "sum") sum = Number(m[3]);
      else count = Number(m[3]);
    }
    return buckets.size ? { buckets, sum, count } : undefined;
  } catch {
    return undefined;
  }
}

/** "N fsyncs, mean X ms, p99 ≤ Y ms[, M msgs/fsync]" for the fsyncs between two scrapes. */
export function fsyncNote(
  a: FsyncHistogram | undefined,
  b: FsyncHistogram | undefined,
  msgs?: number,
) {
  if (!a || !b) return "";
  const count = b.count - a.count;
  if (count <= 0) return "no fsyncs";
  const quantile = (q: number) => {
    for (const [le, n] of b.buckets) {
      if (n - (a.buckets.get(le) ?? 0) >= q * count) {
        return le === "+Inf" ? "> 1 s" : `≤ ${Number(le) * 1000} ms`;
      }
    }
    return "?";
  };
  const mean = (b.sum - a.sum) / count * 1000;
  return `${int(count)} fsyncs, mean ${mean.toFixed(2)} ms, p50 ${quantile(0.5)}, p99 ${
    quantile(0.99)
  }` + (msgs ? `, ${(msgs / count).toFixed(1)} msgs/fsync` : "");
}

/** Bytes of every file under `dir`. */
export async function dirBytes(dir: string): Promise<number> {
  let n = 0;
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile) n += (await Deno.stat(join(dir, e.name))).size;
    else if (e.isDirectory) n += await dirBytes(join(dir, e.name));
  }
  return n;
}

/** Bytes of zeros at the ends of the WAL files in `dir`: the writers' zero-filled tails. */
export async function zeroTailBytes(dir: string): Promise<number> {
  let n = 0;
  for await (const e of Deno.readDir(dir)) {
    if (!e.isFile || !e.name.endsWith(".wal")) continue;
    const bytes = await Deno.readFile(join(dir, e.name));
    let end = bytes.length;
    while (end > 0 && bytes[end - 1] === 0) end--;
    n += bytes.length - end;
  }
  return n;
}
