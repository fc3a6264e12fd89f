/**
 * @module The shape of a bench run: the section names `--only` takes, the parsed options, the
 * durations and sizes of a full and a `--quick` run, and the constants every part shares
 * (paths, units, the polling pace, the quiet-machine thresholds).
 */

/** tests/bench/, where the helper servers, clients and wrk scripts live. */
export const HERE = new URL("../", import.meta.url).pathname;
/** The checkout's root. */
export const ROOT = new URL("../../../", import.meta.url).pathname;
export const WRK_DIR = `${HERE}wrk/`;
export const join = (dir: string, name: string) =>
  dir.endsWith("/") ? dir + name : `${dir}/${name}`;
/** Section names for --only, in the order a run takes them. */
export const SECTIONS = [
  "ceiling",
  "publish",
  "consume",
  "e2e",
  "fanout",
  "webhook",
  "rss",
  "replay",
  "large",
  "cluster",
  "batch",
  "idle",
  "restart",
  "workers",
  "security",
] as const;
export type Section = typeof SECTIONS[number];
export const CONNS = [1, 16, 64] as const;
export const KIB = 1024;
export const MIB = 1024 * 1024;
export const POLL_MS = 10;
/** Machine CPU share (both cores) above which other work is running; see quiet(). */
export const QUIET_BUSY = 0.2;
/** Longest wait for other work to stop before a measured run. */
export const QUIET_WAIT_S = 60;
/** A fill whose topic depth has not moved for this long has failed (429s, errors). */
export const FILL_STALL_MS = 3_000;

/** The command line of a run (parsed in tests/bench/load.ts). */
export interface Options {
  quick: boolean;
  only: Set<Section>;
  broker: string;
  /** Where to write this run's table besides docs/benchmarks.md's rule (--table-file). */
  tableFile?: string;
}

/** Durations and sizes of one run. */
export interface Plan {
  warmS: number;
  runS: number;
  drainCount: number;
  drainConns: number;
  e2eRate: number;
  e2eWarmS: number;
  e2eRunS: number;
  /** SSE streams the fan-out row feeds. */
  fanoutStreams: number;
  rssCount: number;
  replayCount: number;
  /** Messages of 2 MiB held for the large-payload RSS row. */
  largeCount: number;
  /** Messages of 256 KiB drained from disk and from memory. */
  diskCount: number;
}

export const FULL: Plan = {
  warmS: 1,
  runS: 5,
  drainCount: 100_000,
  drainConns: 8,
  e2eRate: 2_000,
  e2eWarmS: 1,
  e2eRunS: 10,
  fanoutStreams: 100,
  rssCount: 100_000,
  replayCount: 1_000_000,
  largeCount: 10_000,
  diskCount: 2_000,
};
export const QUICK: Plan = {
  ...FULL,
  warmS: 0.5,
  runS: 2,
  drainCount: 20_000,
  e2eRunS: 3,
  replayCount: 200_000,
  largeCount: 1_000,
  diskCount: 500,
};

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
