/**
 * No two pages' examples use the same topic, and no page's subscription pattern takes another
 * page's topics, so that running pages in any order on one broker cannot break another (a
 * message one page leaves in a topic is not what the next page's example takes). How pages name
 * their topics: docs/testing.md, "Topic names".
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { blocksOf, pagePaths, readPage } from "./markdown.ts";
import { patternMatches, topicNamesOf, type Use } from "./topic_names.ts";

const where = (u: Use) => `${u.path}:${u.line}`;

Deno.test("docs: no two pages' examples use the same topic name", async () => {
  const pages = await Promise.all((await pagePaths()).map(readPage));
  const uses = pages.map(topicNamesOf);
  const problems: string[] = [];
  const shared = new Map<string, Use[]>();
  for (const names of uses) {
    for (const [name, use] of names) shared.set(name, [...shared.get(name) ?? [], use]);
  }
  for (const [name, all] of shared) {
    if (all.length > 1) problems.push(`topic "${name}": ${all.map(where).join(", ")}`);
  }
  for (const [i, names] of uses.entries()) {
    for (const [pattern, use] of names) {
      if (!pattern.endsWith("*")) continue;
      const taken = uses.flatMap((others, j) =>
        j === i ? [] : [...others].filter(([name]) => patternMatches(pattern, name))
      );
      if (taken.length) {
        problems.push(
          `pattern "${pattern}" at ${where(use)} takes other pages' topics: ${
            taken.map(([name, u]) => `"${name}" (${where(u)})`).join(", ")
          }`,
        );
      }
    }
  }
  assert(
    problems.length === 0,
    `topic names shared by two pages (give each page's topics its own prefix):\n${
      problems.join("\n")
    }`,
  );
});

Deno.test("topicNamesOf() finds the names in URLs, bodies, ferry commands and client calls", () => {
  const text = [
    "```sh",
    "curl -X POST localhost:7800/publish/a1/batch -d 'x'",
    "curl 'localhost:7800/api/queues/peek?queue=a2&limit=1'",
    `curl -X POST localhost:7800/api/groups -d '{"topic":"a3","group":"g"}'`,
    `curl -X POST localhost:7800/api/queues/release -d "{\\"queue\\":\\"a4\\",\\"id\\":\\"$id\\"}"`,
    "ferry --json consume a5 --no-ack",
    "ferry topic create a6 --retain 24h",
    "ferry publish 'bad name' x",
    "```",
    "```ts norun",
    'await ferry.publishBatch("a7", ["x"]);',
    'ws.send(JSON.stringify({ type: "subscribe", topic: "a8.*" }));',
    'for (const topic of ["a9", "a10"]) await fetch(`${BROKER}/publish/${topic}`);',
    "```",
    "```go",
    'c.Process(run, "a11", opts, handle)',
    "```",
    "```text",
    "curl localhost:7800/publish/not-an-example",
    "```",
  ].join("\n");
  const names = topicNamesOf({ path: "p.md", text, blocks: blocksOf(text), env: {} });
  assertEquals([...names.keys()].sort(), [
    "a1",
    "a10",
    "a11",
    "a2",
    "a3",
    "a4",
    "a5",
    "a6",
    "a7",
    "a8.*",
    "a9",
  ]);
});
