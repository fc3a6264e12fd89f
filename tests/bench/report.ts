/**
 * @module The report: the rows every section adds (with the figures later sections compare
 * against), the markdown table in row-number order with its PASS/FAIL column, and the end of a
 * run: the table printed under its heading and machine lines, and written into
 * docs/benchmarks.md (only by a full run of this build, see tests/bench/docs_table.ts) and into
 * the --table-file.
 */

import { BENCH_PAGE, writeTable } from "./docs_table.ts";
import { log } from "./harness/format.ts";
import { machine } from "./harness/machine.ts";
import { join, type Options, ROOT, SECTIONS } from "./harness/plan.ts";

/** The PASS/FAIL column: "" where a row has no target. */

export type Status = "PASS" | "FAIL" | "n/a" | "ERROR" | "";

/** One line of the table. */
export interface Row {
  section: string;
  measure: string;
  conns: string;
  result: string;
  p50: string;
  p99: string;
  notes: string;
  target: string;
  status: Status;
}

/** Every row so far, in the order the sections added them. */
export const rows: Row[] = [];
/** Figures later sections compare against. */
export const figures: {
  ceiling: Map<number, number>;
  /** Publishes per second of the least a durable queue does (ceiling_queue.ts), by conns. */
  queue: Map<number, number>;
  /** Records per second the disk takes at 1, 64 and 1,000 records per fdatasync. */
  disk: Map<number, number>;
  publish: Map<number, number>;
  consume: Map<number, number>;
} = {
  ceiling: new Map(),
  queue: new Map(),
  disk: new Map(),
  publish: new Map(),
  consume: new Map(),
};

/** Adds a row; the columns left out are empty. */
export function row(r: Partial<Row> & Pick<Row, "section" | "measure" | "result">): void {
  rows.push({ conns: "", p50: "", p99: "", notes: "", target: "", status: "", ...r });
}

/** PASS when `ok`, else FAIL. */
export const verdict = (ok: boolean): Status => ok ? "PASS" : "FAIL";

/** Sort key of a row's section: "2b" → [2, "b"]; a failed section's name sorts last. */
function sectionKey(section: string): [number, string] {
  const m = /^(\d+)([a-z]*)$/.exec(section);
  return m ? [Number(m[1]), m[2]!] : [Infinity, section];
}

/** The markdown table of every row, sorted by row number. */
export function table(): string {
  const head = ["#", "measure", "conns", "result", "p50", "p99", "notes", "target", "PASS/FAIL"];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  // Sections run in SECTIONS' order; the table reads in row-number order (stable within one).
  const sorted = [...rows].sort((a, b) => {
    const [na, sa] = sectionKey(a.section), [nb, sb] = sectionKey(b.section);
    return na !== nb ? na - nb : sa < sb ? -1 : sa > sb ? 1 : 0;
  });
  for (const r of sorted) {
    lines.push(
      `| ${
        [r.section, r.measure, r.conns, r.result, r.p50, r.p99, r.notes, r.target, r.status]
          .map((s) => s.replaceAll("|", "\\|")).join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}

/** How a run went, for the lines above its table. */
export interface RunInfo {
  /** performance.now() at the start. */
  started: number;
  startedAt: Date;
  /** /proc/loadavg at the start. */
  loadBefore: string;
  /** Sections that failed. */
  errors: number;
}

/**
 * Prints the run's table under its heading and machine lines, and writes it where it belongs:
 * docs/benchmarks.md when the run stands for this build (every section, not --quick, ./main.ts,
 * no FERRY_BENCH_*, no failed section), and the --table-file whatever the run. Resolves with
 * the failures, the run's and the writes'.
 */
export async function report(o: Options, run: RunInfo): Promise<number> {
  let errors = run.errors;
  const mins = ((performance.now() - run.started) / 60_000).toFixed(1);
  const full = o.only.size === SECTIONS.length;
  const when = `${run.startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC`;
  const block = [
    `Run of ${when} (\`deno task bench${o.quick ? " --quick" : ""}\`, ${
      full ? "every section" : [...o.only].join(", ")
    }, ${mins} min).\n`,
    await machine(run.loadBefore),
    "",
    table(),
  ].join("\n");
  console.log(`## Ferry load benchmark${o.quick ? " (--quick)" : ""}\n`);
  console.log(block);
  // Only a whole run of this build under the start task's settings stands for it on the page.
  const partial = [
    full ? "" : "--only",
    o.quick ? "--quick" : "",
    o.broker === join(ROOT, "main.ts") ? "" : "--broker",
    Deno.env.has("FERRY_BENCH_FLAGS") || Deno.env.has("FERRY_BENCH_ENV") ? "FERRY_BENCH_*" : "",
    errors ? `${errors} failed section${errors === 1 ? "" : "s"}` : "",
  ].filter(Boolean);
  const targets = [...new Set([...(partial.length ? [] : [BENCH_PAGE]), o.tableFile ?? ""])]
    .filter(Boolean);
  if (partial.length) log(`docs/benchmarks.md left as it was (${partial.join(", ")})`);
  for (const file of targets) {
    try {
      await writeTable(file, block, log);
      log(`table written to ${file}`);
    } catch (e) {
      errors++;
      log((e as Error).message);
    }
  }
  return errors;
}
