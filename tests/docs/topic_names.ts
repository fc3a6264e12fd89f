/**
 * The topic names (and subscription patterns) a page's examples use, read from its sh, ts and go
 * blocks, run or `norun`: URL paths (`/publish/X`, `/consume/X`, `/api/topics/X` …), `queue=` and
 * `topic=` in queries, `"queue"`, `"topic"` and `"name"` in JSON bodies and answers, `ferry`
 * commands, and the TypeScript and Go clients' calls. Each page names its topics with a prefix of
 * its own, so that running pages in any order on one broker cannot break another: docs/testing.md,
 * "Topic names".
 */

import type { Page } from "./markdown.ts";

/** A topic name, or a pattern (`prefix*`, `*`) where a subscription takes one. */
const NAME = String.raw`([A-Za-z0-9_][A-Za-z0-9_.-]*\*?|\*)`;
/** What may follow a name: a path, query, quote, space, bracket or the line's end. */
const END = String.raw`(?=[/?&'"\s\`),\]]|\\"|$)`;

const TS_CALLS = [
  "publish",
  "publishBatch",
  "consume",
  "ack",
  "ackMany",
  "touch",
  "peek",
  "redrive",
  "release",
  "createGroup",
  "groups",
  "messages",
  "stream",
  "subscribe",
  "unsubscribe",
  "createTopic",
  "topic",
  "deleteTopic",
  "addWebhook",
  "webhooks",
  "purge",
];
const GO_CALLS = TS_CALLS.map((c) => c[0]!.toUpperCase() + c.slice(1)).concat("Process");
const CLI_COMMANDS = [
  "publish",
  "consume",
  "peek",
  "requeue",
  "ack",
  "redrive",
  "groups",
  "tail",
  String.raw`topic\s+(?:create|purge|delete)`,
  String.raw`webhook\s+(?:add|list)`,
];

/** Where names stand in an example; each has one capture group, the name. */
const WAYS: RegExp[] = [
  new RegExp(
    String.raw`/(?:publish|consume|ack|touch|stream|webhook|api/topics)/${NAME}${END}`,
    "g",
  ),
  new RegExp(String.raw`[?&](?:queue|topic)=${NAME}${END}`, "g"),
  new RegExp(String.raw`\\?"(?:queue|topic|name)\\?"\s*:\s*\\?"${NAME}\\?"`, "g"),
  new RegExp(String.raw`\btopic:\s*"${NAME}"`, "g"),
  new RegExp(String.raw`\.(?:${TS_CALLS.join("|")})\(\s*"${NAME}"`, "g"),
  new RegExp(String.raw`\.(?:${GO_CALLS.join("|")})\(\s*\w+\s*,\s*"${NAME}"`, "g"),
  new RegExp(
    String.raw`\bferry\s+(?:--json\s+)?(?:${CLI_COMMANDS.join("|")})\s+${NAME}${END}`,
    "g",
  ),
];
/** A loop over topic names: `for (const topic of ["a", "b"])`. */
const TOPIC_LOOP = /\btopic\s+of\s+\[([^\]]*)\]/g;

/** Where a name is used: the page and the line. */
export interface Use {
  path: string;
  line: number;
}

/** The names a page's examples use, each with its first use. */
export function topicNamesOf(page: Page): Map<string, Use> {
  const names = new Map<string, Use>();
  const add = (name: string, line: number) => {
    if (!names.has(name)) names.set(name, { path: page.path, line });
  };
  for (const block of page.blocks) {
    if (block.lang !== "sh" && block.lang !== "ts" && block.lang !== "go") continue;
    block.lines.forEach((text, i) => {
      for (const way of WAYS) for (const m of text.matchAll(way)) add(m[1]!, block.line + i);
      for (const m of text.matchAll(TOPIC_LOOP)) {
        for (const q of m[1]!.matchAll(/"([^"]+)"/g)) add(q[1]!, block.line + i);
      }
    });
  }
  return names;
}

/** Whether `pattern` (a name, `prefix*` or `*`) takes messages of topic `name`. */
export function patternMatches(pattern: string, name: string): boolean {
  return pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : pattern === name;
}
