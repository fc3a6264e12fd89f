/**
 * Long fuzz runs against a broker child process:
 * `deno run -A tools/fuzz.ts [--requests 100000] [--seed N] [--mutations 500]
 * [--max-restarts 100] [--progress 1000]`.
 * Prints progress and the report (counts by status, HTTP-layer answers, findings); exits 1 on any
 * finding, 2 on a bad argument. The same campaign, shorter, is tests/fuzz/fuzz_test.ts.
 */

import { parseArgs } from "node:util";
import { runCampaign } from "../tests/fuzz/campaign.ts";
import { formatReport } from "../tests/fuzz/report.ts";

const DEFAULTS: Record<string, number> = {
  requests: 100_000,
  seed: Math.floor(Math.random() * 2 ** 31),
  mutations: 500,
  "max-restarts": 100,
  progress: 1_000,
};

/** The options as whole numbers; a bad one ends the run with exit code 2. */
function options(): Record<string, number> {
  const usage = `usage: tools/fuzz.ts ${Object.keys(DEFAULTS).map((k) => `[--${k} N]`).join(" ")}`;
  try {
    const { values } = parseArgs({
      args: Deno.args,
      options: Object.fromEntries(Object.keys(DEFAULTS).map((k) => [k, { type: "string" }])),
    });
    const out: Record<string, number> = {};
    for (const [k, def] of Object.entries(DEFAULTS)) {
      const v = Number(values[k] ?? def);
      if (!Number.isSafeInteger(v) || v < 0) throw new Error(`--${k} must be a whole number`);
      out[k] = v;
    }
    return out;
  } catch (e) {
    console.error(`fuzz: ${(e as Error).message}\n${usage}`);
    Deno.exit(2);
  }
}

const o = options();
console.log(`[fuzz] seed ${o.seed}, ${o.requests} requests`);
const report = await runCampaign({
  seed: o.seed!,
  requests: o.requests!,
  mutations: o.mutations!,
  maxRestarts: o["max-restarts"],
  progressEvery: o.progress,
  log: console.log,
});
const replay = `deno run -A tools/fuzz.ts --seed ${o.seed} --requests ${o.requests}`;
console.log(formatReport(report, replay));
Deno.exit(report.findings.length ? 1 : 0);
