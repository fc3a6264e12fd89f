/**
 * Aligned, borderless tables in the style of `docker ps`: a header row and columns two spaces
 * apart, numbers to the right. cli-table3 measures cell widths with ANSI colour and wide
 * characters taken into account, which a padEnd of our own would get wrong.
 */

import Table from "cli-table3";
import type { Paint } from "./output.ts";

/** One column: its header and whether its values are numbers (right-aligned). */
export interface Column {
  head: string;
  numeric?: boolean;
}

const NO_BORDER = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "  ",
};

/** The table as text, without trailing spaces; `empty` stands in for a table with no rows. */
export function table(
  columns: Column[],
  rows: (string | number)[][],
  paint: Paint,
  empty = "(none)",
): string {
  if (!rows.length) return empty;
  const t = new Table({
    head: columns.map((c) => paint.bold(c.head)),
    chars: NO_BORDER,
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
    colAligns: columns.map((c) => c.numeric ? "right" : "left"),
  });
  for (const row of rows) t.push(row.map(String));
  return t.toString().split("\n").map((line) => line.trimEnd()).join("\n");
}
