/**
 * @module wrk runs: a Lua script of tests/bench/wrk/ against a URL for a fixed time or until a
 * condition holds, read back from the `FERRY_RESULT {json}` line the script prints from done().
 */

import { track } from "./cleanup.ts";
import { int } from "./format.ts";
import { join, POLL_MS, sleep, WRK_DIR } from "./plan.ts";

/** What the scripts' done() reports: request counts, errors, latency quantiles, counters. */
export interface WrkResult {
  requests: number;
  duration_us: number;
  connect_errors: number;
  read_errors: number;
  write_errors: number;
  status_errors: number;
  timeouts: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
  [counter: string]: number;
}

/** One wrk invocation: script, target, threads, connections, duration, script args. */
export interface WrkRun {
  script: string;
  url: string;
  threads: number;
  conns: number;
  seconds: number;
  args?: string[];
}

export function spawnWrk(r: WrkRun): { proc: Deno.ChildProcess; out: Promise<Deno.CommandOutput> } {
  const proc = track(
    new Deno.Command("wrk", {
      args: [
        `-t${r.threads}`,
        `-c${r.conns}`,
        `-d${Math.max(1, Math.ceil(r.seconds))}s`,
        "--timeout",
        "10s",
        "-s",
        join(WRK_DIR, r.script),
        r.url,
        "--",
        ...(r.args ?? []),
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn(),
  );
  return { proc, out: proc.output() };
}

export function parseWrk(out: Deno.CommandOutput): WrkResult {
  const text = new TextDecoder().decode(out.stdout);
  const line = text.split("\n").find((l) => l.startsWith("FERRY_RESULT "));
  if (!line) {
    throw new Error(`wrk gave no result:\n${text}\n${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(line.slice("FERRY_RESULT ".length));
}

/** Runs wrk for `seconds` (whole seconds, as wrk takes them). */
export async function wrkTimed(r: WrkRun): Promise<WrkResult> {
  const { proc, out } = spawnWrk(r);
  const killer = setTimeout(() => proc.kill("SIGKILL"), (r.seconds + 30) * 1000);
  try {
    return parseWrk(await out);
  } finally {
    clearTimeout(killer);
  }
}

/** Runs wrk until `done()` holds (checked every POLL_MS), then stops it with SIGINT. */
export async function wrkUntil(
  r: WrkRun,
  done: () => Promise<boolean>,
): Promise<{ result: WrkResult; elapsedMs: number; finished: boolean }> {
  const t0 = performance.now();
  const { proc, out } = spawnWrk(r);
  let exited = false;
  out.finally(() => exited = true);
  let finished = false;
  const limit = t0 + r.seconds * 1000;
  while (!exited && performance.now() < limit) {
    await sleep(POLL_MS);
    if (await done().catch(() => false)) {
      finished = true;
      break;
    }
  }
  const elapsedMs = performance.now() - t0;
  try {
    proc.kill("SIGINT");
  } catch { /* gone */ }
  const killer = setTimeout(() => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone */ }
  }, 10_000);
  try {
    return { result: parseWrk(await out), elapsedMs, finished };
  } finally {
    clearTimeout(killer);
  }
}

/** "N non-2xx, M socket errors" of a run, or "". */
export function errorsOf(w: WrkResult): string {
  const parts = [];
  if (w.status_errors) parts.push(`${int(w.status_errors)} non-2xx`);
  const sock = w.connect_errors + w.read_errors + w.write_errors + w.timeouts;
  if (sock) parts.push(`${int(sock)} socket errors`);
  return parts.join(", ");
}
