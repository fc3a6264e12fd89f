/**
 * Long crash-loop campaign: `deno run -A tools/crash_loop.ts [--iterations 50] [--seed N]
 * [--fsync always|interval|never] [--compaction]`. Runs `tests/durability/crash_loop.ts` on a
 * fresh temp data dir: N rounds of mixed traffic, SIGKILL, restart and a check against the ledger.
 * Prints the seed, one line per iteration and a verdict; exits 0 when the ledger held, 1
 * otherwise. Ctrl-C (or SIGTERM) kills the child broker and removes the data dir.
 */

import { parseArgs } from "node:util";
import {
  crashLoop,
  CrashLoopError,
  type CrashLoopReport,
  SCENARIOS,
} from "../tests/durability/crash_loop.ts";

const USAGE = "usage: deno run -A tools/crash_loop.ts [--iterations 50] [--seed N] " +
  "[--fsync always|interval|never] [--compaction]";
/** Plain runs drain their backlog with auto_ack this often, so long runs stay under the cap. */
const PLAIN_DRAIN_EVERY = 10;
const FSYNC_MODES = ["always", "interval", "never"];

/** Prints why and the usage, then exits with `code`. */
function usage(why: string, code = 2): never {
  console.error(`${why}\n${USAGE}`);
  Deno.exit(code);
}

/** The flags, checked. */
function options(): { iterations: number; seed: number; fsync: string; compaction: boolean } {
  let v;
  try {
    v = parseArgs({
      args: Deno.args,
      options: {
        iterations: { type: "string", default: "50" },
        seed: { type: "string", default: String(Date.now() % 1_000_000) },
        fsync: { type: "string", default: "always" },
        compaction: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }).values;
  } catch (e) {
    usage((e as Error).message);
  }
  if (v.help) usage("Runs SIGKILL/restart iterations against the broker and checks a ledger.", 0);
  const iterations = Number(v.iterations), seed = Number(v.seed);
  if (!Number.isInteger(iterations) || iterations < 1) usage("--iterations must be an integer ≥ 1");
  if (!Number.isInteger(seed) || seed < 0) usage("--seed must be an integer ≥ 0");
  if (!FSYNC_MODES.includes(v.fsync)) usage(`--fsync must be one of ${FSYNC_MODES.join(", ")}`);
  return { iterations, seed, fsync: v.fsync, compaction: v.compaction };
}

/** Sums of the iteration counts, for the verdict. */
function totals(r: CrashLoopReport): string {
  const sum = (k: "published" | "acked" | "requeued" | "deadLettered") =>
    r.iterations.reduce((n, it) => n + it[k], 0);
  const recoveryMs = Math.max(0, ...r.iterations.map((it) => it.recovered.durationMs));
  const splits = Math.max(0, ...r.iterations.map((it) => it.split));
  return `${sum("published")} published, ${sum("acked")} acked, ${sum("requeued")} requeued, ` +
    `${sum("deadLettered")} dead-lettered, ${splits} split by a kill, ${r.compactions} ` +
    `compactions, slowest recovery ${recoveryMs} ms`;
}

const o = options();
const scenario = o.compaction
  ? SCENARIOS.compaction
  : { ...SCENARIOS.plain, drainEvery: PLAIN_DRAIN_EVERY };
const flags = `--iterations ${o.iterations} --seed ${o.seed} --fsync ${o.fsync}` +
  (o.compaction ? " --compaction" : "");
console.log(`crash loop ${flags}`);

const abort = new AbortController();
let signals = 0;
const onSignal = () => {
  if (++signals > 1) Deno.exit(1); // a second Ctrl-C: the first already SIGKILLed the broker
  console.log("interrupted: killing the broker");
  abort.abort(new Error("interrupted"));
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);

const t0 = performance.now();
const took = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
let code = 1;
try {
  const report = await crashLoop({
    ...scenario,
    env: { ...scenario.env, BROKER_FSYNC: o.fsync },
    iterations: o.iterations,
    seed: o.seed,
    log: console.log,
    signal: abort.signal,
  });
  console.log(
    `PASS: the ledger held over ${o.iterations} iterations in ${took()}: ` +
      totals(report),
  );
  code = 0;
} catch (e) {
  if (abort.signal.aborted) {
    console.log(`INTERRUPTED after ${took()}; repeat with ${flags}`);
  } else if (e instanceof CrashLoopError) {
    console.log(
      `FAIL in iteration ${e.report.iterations.length} after ${took()} ` +
        `(repeat with ${flags}):\n${e.report.problems.join("\n")}`,
    );
  } else {
    console.log(`FAIL: the campaign itself broke (repeat with ${flags}): ${(e as Error).stack}`);
  }
} finally {
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
}
Deno.exit(code);
