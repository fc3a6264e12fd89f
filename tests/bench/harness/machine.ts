/**
 * @module The machine lines above the table: CPU, RAM and kernel, the deno and wrk versions, the
 * commit, the load average at start and the worst CPU other processes used during the run.
 */

import { readMachine } from "../docs_table.ts";
import { othersWorstShare } from "./cpu.ts";
import { pct } from "./format.ts";
import { QUIET_BUSY, QUIET_WAIT_S, ROOT } from "./plan.ts";

/** The first three fields of /proc/loadavg. */

export async function loadAvg(): Promise<string> {
  const text = await Deno.readTextFile("/proc/loadavg").catch(() => "");
  return text.split(" ").slice(0, 3).join(" ");
}

/** The machine lines, given the load average read at start. */
export async function machine(loadBefore: string): Promise<string> {
  const m = await readMachine();
  const ram = m.ramBytes ? `, ${(m.ramBytes / 1024 ** 3).toFixed(1)} GiB RAM` : "";
  const cmd = async (c: string, args: string[]) => {
    try {
      const out = await new Deno.Command(c, { args, stdout: "piped", stderr: "piped" }).output();
      const d = new TextDecoder();
      return (d.decode(out.stdout) + d.decode(out.stderr)).trim().split("\n")[0] ?? "";
    } catch {
      return "";
    }
  };
  const commit = await cmd("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"]);
  const wrk = (await cmd("wrk", ["-v"])).replace(/ Copyright.*/, "");
  return [
    `- machine: ${
      m.cores || navigator.hardwareConcurrency
    } × ${m.cpu}${ram}, Linux ${Deno.osRelease()}`,
    `- deno ${Deno.version.deno} (v8 ${Deno.version.v8}), ${wrk}`,
    `- commit ${commit || "unknown"}, BROKER_FSYNC=always`,
    `- load average at start ${loadBefore}; before each run the harness waits up to ` +
    `${QUIET_WAIT_S} s for the CPUs to be < ${pct(QUIET_BUSY)} busy; other processes' CPU: worst ${
      pct(othersWorstShare())
    }` +
    (othersWorstShare() > QUIET_BUSY
      ? " (BUSY MACHINE: rows marked BUSY ran beside other work)"
      : ""),
  ].join("\n");
}
