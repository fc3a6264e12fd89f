/**
 * Long cluster chaos campaign: `deno task chaos [--kills 20] [--load-ms 1500]`. Runs
 * `tests/cluster/chaos.ts`: three brokers on a real etcd under publishing and acking, the leader
 * SIGKILLed `--kills` times, then the ledger check. Prints each failover time, min/median/max,
 * and exits 0 when the cluster kept its word, 1 otherwise.
 */

import { parseArgs } from "node:util";
import { runChaos } from "../tests/cluster/chaos.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    kills: { type: "string", default: "20" },
    "load-ms": { type: "string", default: "1500" },
  },
});
const kills = Number(values.kills);
const loadMs = Number(values["load-ms"]);
if (!Number.isInteger(kills) || kills < 1 || !Number.isInteger(loadMs) || loadMs < 100) {
  console.error("usage: deno task chaos [--kills 20] [--load-ms 1500]");
  Deno.exit(2);
}
const r = await runChaos({ kills, loadMs, log: (l) => console.log(l) });
const sorted = [...r.failovers].sort((a, b) => a - b);
const median = sorted[Math.floor(sorted.length / 2)];
console.log(
  `failover over ${sorted.length} kills: min ${sorted[0]} ms, median ${median} ms, max ${
    sorted.at(-1)
  } ms; ${r.published} published, ${r.acked} acked`,
);
if (r.violations.length) {
  console.log(`FAILED: ${r.violations.length} broken promises`);
  for (const v of r.violations.slice(0, 50)) console.log(`  ${v}`);
  Deno.exit(1);
}
console.log("ok: every acknowledged publish held once unless acked; no ack undone");
