/**
 * A page's ```sh block run by bash against the page's broker: `curl` and `ferry` are wrapped so
 * each call's status, exit code and output are recorded with the line it came from, then
 * checked against the answer the page shows under the command (tests/docs/shown.ts). Shell
 * variables carry over to the page's next sh block.
 */

import { ferryPermissions } from "../_support/cli.ts";
import type { Block } from "./markdown.ts";
import { httpMismatch, matches, parseCurlOutput, parseShownHttp } from "./shown.ts";

const CLI_MAIN = new URL("../../cli/main.ts", import.meta.url).pathname;

/** One command of a block: its lines in the block, and the answer shown under it. */
export interface Command {
  /** Index of its first and last line in the block. */
  first: number;
  last: number;
  text: string;
  shown: string[];
}

/** A trailing `# 204` / `# (exit 1)` on a command's own line. */
const INLINE_ANSWER = /\s#\s+((?:\d{3}|HTTP\/[\d.]+ \d{3}|\(exit \d+\))(?:\s.*)?)$/;

/**
 * The commands of a block: a line that is not a comment starts one; `\` line ends, an open
 * single quote and a heredoc carry it on. Comment lines right after a command (no blank line
 * between) are its shown answer.
 */
export function commandsOf(lines: string[]): Command[] {
  const commands: Command[] = [];
  let current: Command | undefined;
  let answering = false;
  let heredoc: string | undefined;
  const open = (text: string) =>
    text.endsWith("\\") || (text.replace(/\\'/g, "").split("'").length - 1) % 2 === 1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (current && (heredoc !== undefined || open(current.text))) {
      current.last = i;
      current.text += "\n" + line;
      if (heredoc !== undefined && line.trim() === heredoc) heredoc = undefined;
      continue;
    }
    const trimmed = line.trim();
    if (!trimmed) {
      answering = false;
      continue;
    }
    if (trimmed.startsWith("#")) {
      if (answering && current) current.shown.push(trimmed.replace(/^#\s?/, ""));
      continue;
    }
    current = { first: i, last: i, text: line, shown: [] };
    commands.push(current);
    answering = true;
    const tag = /<<-?\s*['"]?(\w+)['"]?/.exec(line);
    if (tag) heredoc = tag[1];
  }
  for (const c of commands) {
    const inline = INLINE_ANSWER.exec(c.text.split("\n").at(-1)!);
    if (inline) c.shown.unshift(inline[1]!);
  }
  return commands;
}

/** Bash functions standing in for curl and ferry: they record each call under $__DOC. */
function prelude(deno: string): string {
  const ferry = [deno, "run", "--quiet", ...ferryPermissions(), CLI_MAIN].map((w) => `'${w}'`);
  return `
__doc_n=$(cat "$__DOC/n" 2>/dev/null || echo 0)
curl() {
  local n=$((++__doc_n)) line=\${BASH_LINENO[0]} rc=0
  echo "$__doc_n" > "$__DOC/n"
  command curl -sS "$@" -w '%{stderr}\\n__STATUS__%{http_code}' 2>"$__DOC/$n.err" | tee "$__DOC/$n.out" || rc=\${PIPESTATUS[0]}
  echo "$n $line curl $rc" >> "$__DOC/calls"
  return "$rc"
}
ferry() {
  local n=$((++__doc_n)) line=\${BASH_LINENO[0]} rc=0
  echo "$__doc_n" > "$__DOC/n"
  ${ferry.join(" ")} "$@" 2>"$__DOC/$n.err" | tee "$__DOC/$n.out" || rc=\${PIPESTATUS[0]}
  echo "$n $line ferry $rc" >> "$__DOC/calls"
  return 0
}
trap 'echo "__FAILED__ $LINENO: $BASH_COMMAND" >&2' ERR
`;
}

/** What running a block found wrong, each with the page's line; empty when all matched. */
export async function runShellBlock(
  block: Block,
  opts: { page: string; brokerUrl: string; workDir: string; stateDir: string },
): Promise<string[]> {
  const deno = Deno.execPath();
  const host = new URL(opts.brokerUrl).host;
  // The page's answers name the documented address too, so they are pointed at the broker as well.
  const code = block.lines.map((l) => l.replace(/\b(?:localhost|127\.0\.0\.1):7800\b/g, host));
  const commands = commandsOf(code);
  const head = [
    "set -euo pipefail",
    "__doc_known=$(compgen -v)",
    `if [ -f "$__DOC/vars" ]; then source "$__DOC/vars"; fi`,
    prelude(deno),
  ].join("\n");
  const headLines = head.split("\n").length;
  const tail = [
    // Variables the block set, for the page's next block.
    `for __v in $(compgen -v); do case "$__v" in __*|BASH*|FUNCNAME|PIPESTATUS|_|LINENO|RANDOM|SECONDS|SRANDOM|EPOCH*|COMP*|OPT*|HIST*|PPID|UID|EUID|GROUPS|SHLVL|PWD|OLDPWD) continue;; esac;`,
    `  grep -qx "$__v" <<<"$__doc_known" && continue; declare -p "$__v"; done > "$__DOC/vars"`,
  ];
  const script = [head, ...code, ...tail].join("\n") + "\n";
  const file = `${opts.stateDir}/block.sh`;
  await Deno.writeTextFile(file, script);
  await Deno.remove(`${opts.stateDir}/calls`).catch(() => {});
  const out = await new Deno.Command("bash", {
    args: [file],
    cwd: opts.workDir,
    env: { __DOC: opts.stateDir, FERRY_URL: opts.brokerUrl, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  const docLine = (scriptLine: number) => block.line + scriptLine - headLines - 1;
  const problems: string[] = [];
  const failed = /__FAILED__ (\d+): (.*)/.exec(stderr);
  if (!out.success) {
    const where = failed ? `${opts.page}:${docLine(Number(failed[1]))}` : opts.page;
    problems.push(
      `${where}: the block failed (exit ${out.code}) at ${failed?.[2] ?? "?"}\n${stderr}`,
    );
  }
  const calls = (await Deno.readTextFile(`${opts.stateDir}/calls`).catch(() => ""))
    .split("\n").filter(Boolean).map((l) => l.split(" "));
  for (const c of commands) {
    const mine = calls.filter(([, line]) => {
      const at = Number(line) - headLines - 1;
      return at >= c.first && at <= c.last;
    });
    const where = `${opts.page}:${block.line + c.first}`;
    if (!mine.length) {
      if (c.shown.length && out.success) {
        problems.push(`${where}: an answer is shown, no call made`);
      }
      continue;
    }
    for (const [n, , kind, rc] of mine) {
      const text = await Deno.readTextFile(`${opts.stateDir}/${n}.out`);
      const err = await Deno.readTextFile(`${opts.stateDir}/${n}.err`);
      const last = n === mine.at(-1)![0];
      const problem = kind === "curl"
        ? checkCurl(c, text, err, rc!, last)
        : checkFerry(c, text, err, Number(rc), last);
      if (problem) problems.push(`${where}: ${c.text.split("\n")[0]}\n  ${problem}`);
    }
  }
  return problems;
}

/** Checks one curl call of `c` (the shown answer applies to its last call). */
function checkCurl(c: Command, out: string, err: string, rc: string, last: boolean) {
  if (rc !== "0") return `curl exited ${rc}: ${err.replace(/__STATUS__\d+/, "").trim()}`;
  const status = Number(/__STATUS__(\d+)\s*$/.exec(err)?.[1]);
  const answer = parseCurlOutput(out, status);
  if (!c.shown.length || !last) {
    return status < 400 ? undefined : `status ${status} and no answer shown: ${answer.body}`;
  }
  const shown = parseShownHttp(c.shown);
  if (!shown) return `the shown answer is not "<status> <body>": ${c.shown[0]}`;
  return httpMismatch(shown, answer);
}

/** Checks one ferry call of `c`: its exit code, and its output against the shown lines. */
function checkFerry(c: Command, out: string, err: string, rc: number, last: boolean) {
  const shown = [...c.shown];
  const exit = /^\(exit (\d+)\)/.exec(shown[0] ?? "");
  if (exit) shown.shift();
  const want = exit ? Number(exit[1]) : 0;
  const printed = (out + err).replace(/\n$/, "");
  if (rc !== want) return `exit ${rc}, want ${want}:\n${printed}`;
  if (!last || !shown.length) return undefined;
  return matches(shown.join("\n"), printed)
    ? undefined
    : `output:\n  real:\n${indent(printed)}\n  shown:\n${indent(shown.join("\n"))}`;
}

const indent = (s: string) => s.split("\n").map((l) => "    " + l).join("\n");
