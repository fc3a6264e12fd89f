/**
 * Text from the broker made safe for a terminal: its control characters shown as escapes, so a
 * payload, a header or an error detail cannot drive the terminal (docs/cli.md).
 */

/** What a terminal acts on instead of showing: C0 controls, DEL and C1 controls. */
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;
const NAMED: Partial<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** One control character as an escape: `\n`, `\r`, `\t` by name, others as `\x1b`. */
function escape(c: string): string {
  return NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
}

/**
 * Text from the broker for one line of a terminal: every control character as an escape (`\x1b`,
 * `\n`). Backslashes stay as they are, so the escapes are for reading; --json has the exact text.
 */
export function shown(text: string): string {
  return text.replace(CONTROL, escape);
}

/** As `shown`, but newlines and tabs stay: a payload of several lines reads as it is. */
export function shownText(text: string): string {
  return text.replace(CONTROL, (c) => c === "\n" || c === "\t" ? c : escape(c));
}
