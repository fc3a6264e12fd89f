/**
 * @module One answer from every worker's (routes/shards.ts): what a route that spans topics
 * answers when the broker runs several workers. Each worker answers for its own topics; lists are
 * joined, counts added, and what is the same for the whole process (the memory budget, the
 * cluster role, process metrics) taken once. A worker's error answer is the answer.
 */

import type { ClusterStatus, RatesJson, StatsJson } from "../protocol/wire.ts";

type Merge = (answers: Response[]) => Promise<Response>;

/** The first answer that is not a success, if any. */
function failed(answers: Response[]): Response | undefined {
  return answers.find((r) => r.status >= 300);
}

/**
 * Merges JSON answers: the first failure is the answer; else `merge` makes one body of every
 * worker's, sent with the first answer's status and headers.
 */
function jsonMerge<T>(merge: (all: T[]) => unknown): Merge {
  return async (answers) => {
    const bad = failed(answers);
    if (bad) return bad;
    const all = await Promise.all(answers.map((r) => r.json() as Promise<T>));
    return jsonLike(answers[0]!, merge(all));
  };
}

/** A JSON answer with the first answer's status and headers, and `body`. */
function jsonLike(first: Response, body: unknown): Response {
  const headers = new Headers(first.headers);
  headers.delete("content-length");
  return new Response(JSON.stringify(body), { status: first.status, headers });
}

/** Every worker's JSON array, joined and sorted by `key`. */
export function joinedList(key: string): Merge {
  const by = (v: unknown) => String((v as Record<string, unknown>)[key]);
  return jsonMerge<unknown[]>((all) =>
    all.flat().sort((a, b) => by(a) < by(b) ? -1 : by(a) > by(b) ? 1 : 0)
  );
}

/** The first answer that found what was asked (an id only one worker knows), else the first. */
export const firstFound: Merge = (answers) => {
  return Promise.resolve(answers.find((r) => r.status !== 404) ?? answers[0]!);
};

/** The first answer that is not a success (a draining or failed worker), else the first. */
export const worst: Merge = (answers) => Promise.resolve(failed(answers) ?? answers[0]!);

/** GET /api/stats: totals and held bytes added, every worker's topics together. */
export const mergedStats = jsonMerge<StatsJson>((all) => {
  const out = all[0]!;
  for (const s of all.slice(1)) {
    addCounts(out.totals, s.totals);
    out.memory.held_bytes += s.memory.held_bytes;
    out.memory.drain_bytes_per_second += s.memory.drain_bytes_per_second;
    // One file system: the lowest figure seen, and an alarm if any worker has raised it.
    if (out.disk && s.disk) {
      out.disk.alarm ||= s.disk.alarm;
      if (s.disk.free_bytes !== null) {
        out.disk.free_bytes = Math.min(out.disk.free_bytes ?? Infinity, s.disk.free_bytes);
      }
    }
    Object.assign(out.topics, s.topics);
  }
  return out;
});

/** The message counters that totals and rate samples both carry. */
type Counts = StatsJson["totals"];
const COUNTS: (keyof Counts)[] = [
  "published",
  "delivered",
  "acked",
  "requeued",
  "dead_lettered",
  "expired",
];

/** Adds `b`'s counters into `a`. */
function addCounts(a: Counts, b: Counts): void {
  for (const k of COUNTS) a[k] += b[k];
}

/**
 * GET /api/rates without `?queue=`: the totals added sample by sample, newest aligned with
 * newest (workers sample on their own clocks, the same interval), and every worker's topics.
 */
export const mergedRates = jsonMerge<RatesJson>((all) => {
  const out = all[0]!;
  for (const r of all.slice(1)) {
    const n = Math.min(out.totals.length, r.totals.length);
    for (let i = 1; i <= n; i++) addCounts(out.totals.at(-i)!, r.totals.at(-i)!);
    if (r.topics) out.topics = Object.assign(out.topics ?? {}, r.topics);
  }
  return out;
});

/**
 * GET /api/cluster/status: the node's state is every worker's (they mirror one election); each
 * worker streams its own shard, so a follower is as far behind as its furthest shard, and
 * synchronous only if every shard counts it.
 */
export const mergedClusterStatus = jsonMerge<ClusterStatus>((all) => {
  const out = all[0]!;
  for (const s of all.slice(1)) {
    for (const p of out.peers) {
      const q = s.peers.find((x) => x.id === p.id);
      if (!q) continue;
      p.lag_records = maxOrNull(p.lag_records, q.lag_records);
      p.lag_seconds = maxOrNull(p.lag_seconds, q.lag_seconds);
      p.synchronous &&= q.synchronous;
    }
  }
  return out;
});

function maxOrNull(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}

/** Metrics whose value is the process's or the broker's, the same in every worker: taken once. */
const ONCE =
  /^(process_|ferry_memory_budget_bytes|ferry_disk_free_|ferry_cluster_|ferry_elections_total)/;
/** Metrics of how far behind something is: each worker's shard is, the node as far as the most. */
const MOST = /^(ferry_replication_lag_|ferry_disk_alarm)/;

/**
 * GET /metrics: one exposition. A series (name and labels) that several workers report is
 * added up (counters, histogram buckets, per-topic gauges: each topic is one worker's anyway),
 * except the process-wide ones, taken from the first worker, and replication lags, the
 * largest; HELP and TYPE appear once.
 */
export const mergedMetrics: Merge = async (answers) => {
  const bad = failed(answers);
  if (bad) return bad;
  const texts = await Promise.all(answers.map((r) => r.text()));
  // Each family's HELP and TYPE, then its series, in first-seen order: the text format wants a
  // family's lines together.
  type Family = { comments: string[]; series: Map<string, number> };
  const families = new Map<string, Family>();
  const fresh = (): Family => ({ comments: [], series: new Map() });
  for (const text of texts) {
    let family = families.get("") ?? fresh();
    families.set("", family);
    for (const line of text.split("\n")) {
      if (line === "") continue;
      if (line.startsWith("# HELP ") || line.startsWith("# TYPE ")) {
        const name = line.slice(7, line.indexOf(" ", 7));
        family = families.get(name) ?? fresh();
        families.set(name, family);
        if (!family.comments.includes(line)) family.comments.push(line);
        continue;
      }
      if (line.startsWith("#")) continue;
      const space = line.lastIndexOf(" ");
      const key = line.slice(0, space);
      const value = Number(line.slice(space + 1));
      const had = family.series.get(key);
      if (had === undefined) family.series.set(key, value);
      else if (MOST.test(key)) family.series.set(key, Math.max(had, value));
      else if (!ONCE.test(key)) family.series.set(key, had + value);
    }
  }
  const lines: string[] = [];
  for (const { comments, series } of families.values()) {
    lines.push(...comments);
    for (const [key, value] of series) lines.push(`${key} ${value}`);
  }
  const headers = new Headers(answers[0]!.headers);
  headers.delete("content-length");
  return new Response(lines.join("\n") + "\n", { status: 200, headers });
};
