/**
 * @module CPU readings from /proc: the machine's busy share, a process's clock ticks, and the
 * quiet-machine guard: quiet() waits for other work to stop before a measured run, busyNote()
 * says in the row when processes outside the harness used the CPUs anyway.
 */

import { live } from "./cleanup.ts";
import { log, pct } from "./format.ts";
import { QUIET_BUSY, QUIET_WAIT_S, sleep } from "./plan.ts";

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux). */
export const USER_HZ = 100;

/** CPU time counters of the whole machine from /proc/stat: [busy, total] clock ticks. */
export async function cpuTimes(): Promise<[number, number]> {
  const line = (await Deno.readTextFile("/proc/stat")).split("\n")[0] ?? "";
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  // everything but idle and iowait: processes' stime includes interrupt work done for them
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return [total - idle, total];
}

/** Share of all CPUs busy over `ms` milliseconds. */
export async function cpuBusy(ms: number): Promise<number> {
  const [b0, t0] = await cpuTimes();
  await sleep(ms);
  const [b1, t1] = await cpuTimes();
  return t1 > t0 ? (b1 - b0) / (t1 - t0) : 0;
}

/** utime+stime (+ cutime+cstime with `children`) of a process, in clock ticks. */
export async function procTicks(pid: number | "self", children = false): Promise<number> {
  const text = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => "");
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ").map(Number);
  // fields after the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14)
  return (f[11] ?? 0) + (f[12] ?? 0) + (children ? (f[13] ?? 0) + (f[14] ?? 0) : 0);
}

/** CPU counters taken at one moment (cpuSnapshot()). */
export interface CpuSnapshot {
  machine: [number, number];
  self: number;
  children: Map<number, number>;
}

/** CPU counters of the machine, of this process with its reaped children, and of live children. */
export async function cpuSnapshot(): Promise<CpuSnapshot> {
  const children = new Map<number, number>();
  for (const p of live) children.set(p.pid, await procTicks(p.pid));
  return { machine: await cpuTimes(), self: await procTicks("self", true), children };
}

/**
 * Share of all CPUs that processes outside the harness (itself, wrk, brokers, clients) used
 * between two snapshots. Children that exited meanwhile were reaped into this process's cutime.
 */
export function othersShare(a: CpuSnapshot, b: CpuSnapshot): number {
  let mine = b.self - a.self;
  for (const [pid, t] of b.children) mine += t - (a.children.get(pid) ?? 0);
  for (const [pid, t] of a.children) if (!b.children.has(pid)) mine -= t;
  const total = b.machine[1] - a.machine[1];
  return total > 0 ? Math.max(0, (b.machine[0] - a.machine[0] - mine) / total) : 0;
}

/** Other processes' CPU share around measured runs, worst since the last row; and overall. */
let othersSince: CpuSnapshot | undefined;
let othersBefore = 0, othersWorst = 0;

/**
 * Waits (up to QUIET_WAIT_S) until other processes leave the CPUs mostly idle, so a run is not
 * measured against someone else's tests, then starts counting their CPU use until busyNote().
 * The harness's own children are idle when this is called.
 */
export async function quiet(): Promise<void> {
  let busy = await cpuBusy(300);
  const deadline = performance.now() + QUIET_WAIT_S * 1000;
  if (busy > QUIET_BUSY) log(`machine busy (${pct(busy)} CPU); waiting up to ${QUIET_WAIT_S} s`);
  while (busy > QUIET_BUSY && performance.now() < deadline) busy = await cpuBusy(1000);
  othersBefore = Math.max(othersBefore, busy);
  othersSince ??= await cpuSnapshot();
}

/** A note for the row when other processes used the CPUs before or during its runs. */
export async function busyNote(): Promise<string> {
  const during = othersSince ? othersShare(othersSince, await cpuSnapshot()) : 0;
  const before = othersBefore;
  othersSince = undefined;
  othersBefore = 0;
  othersWorst = Math.max(othersWorst, before, during);
  if (before <= QUIET_BUSY && during <= QUIET_BUSY) return "";
  return `BUSY: other processes used ${pct(before)} CPU before, ${pct(during)} during`;
}

/** The worst share of the CPUs other processes used before or during any row so far. */
export function othersWorstShare(): number {
  return othersWorst;
}
