/**
 * @module The bench's results page: the machine as /proc describes it, and the latest table
 * written into docs/benchmarks.md between two marker comments, so the page always shows what
 * the last full `deno task bench` measured, with nothing copied by hand.
 */

export const TABLE_START = "<!-- bench:table:start -->";
export const TABLE_END = "<!-- bench:table:end -->";

/** The page a full run writes its table into. */
export const BENCH_PAGE = new URL("../../docs/benchmarks.md", import.meta.url).pathname;

/** CPU model, core count and RAM of this machine, read from /proc. */
export interface Machine {
  cpu: string;
  cores: number;
  ramBytes: number;
}

/** Reads /proc/cpuinfo and /proc/meminfo; unknown fields come back as "unknown CPU" or 0. */
export async function readMachine(): Promise<Machine> {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  const meminfo = await Deno.readTextFile("/proc/meminfo").catch(() => "");
  const cpu = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? "unknown CPU";
  const cores = cpuinfo.match(/^processor\s*:/gm)?.length ?? 0;
  const kib = Number(/^MemTotal:\s*(\d+)\s*kB/m.exec(meminfo)?.[1] ?? 0);
  return { cpu, cores, ramBytes: kib * 1024 };
}

/** Offsets of each line of `page` that is exactly `marker` (spaces around it allowed). */
function markerLines(page: string, marker: string): number[] {
  const found: number[] = [];
  for (let at = 0; at <= page.length;) {
    const eol = page.indexOf("\n", at);
    const end = eol < 0 ? page.length : eol;
    if (page.slice(at, end).trim() === marker) found.push(at);
    at = end + 1;
  }
  return found;
}

/**
 * `page` with every line between its start and end marker lines replaced by `block`. A marker
 * counts only as a line of its own, so prose may quote it. Throws when a marker is missing,
 * repeated or out of order, so a page is never half overwritten.
 */
export function replaceTable(page: string, block: string): string {
  const starts = markerLines(page, TABLE_START), ends = markerLines(page, TABLE_END);
  if (starts.length !== 1 || ends.length !== 1) {
    throw new Error(
      `Cannot write the bench table: expected one line "${TABLE_START}" and one line ` +
        `"${TABLE_END}", found ${starts.length} and ${ends.length}`,
    );
  }
  const start = starts[0]!, end = ends[0]!;
  if (end < start) throw new Error("Cannot write the bench table: the end marker comes first");
  const afterStart = start + page.slice(start).indexOf(TABLE_START) + TABLE_START.length;
  return `${page.slice(0, afterStart)}\n\n${block.trim()}\n\n${page.slice(end)}`;
}

/**
 * Replaces the table block of the page at `path` (through a temp file and a rename), then runs
 * `deno fmt` on it so `deno fmt --check` stays clean. A failed format is logged, not thrown.
 */
export async function writeTable(
  path: string,
  block: string,
  log: (msg: string) => void,
): Promise<void> {
  if (!path.startsWith("/")) path = `${Deno.cwd()}/${path}`; // deno fmt runs from the root
  const page = replaceTable(await Deno.readTextFile(path), block);
  const tmp = `${path}.bench-tmp`;
  await Deno.writeTextFile(tmp, page);
  await Deno.rename(tmp, path);
  const root = new URL("../../", import.meta.url).pathname;
  const fmt = await new Deno.Command(Deno.execPath(), {
    args: ["fmt", "-q", "--config", `${root}deno.json`, path],
    cwd: root,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!fmt.success) log(`deno fmt ${path} failed: ${new TextDecoder().decode(fmt.stderr).trim()}`);
}
