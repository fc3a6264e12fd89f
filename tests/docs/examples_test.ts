/**
 * Every example of README.md and docs/ runs: each page gets a broker process of its own (started
 * as `deno task start` starts it, with the page's `<!-- docs:test env … -->` settings), and its
 * sh, ts and go blocks run in order against it; a block's shown answers must match the real
 * ones. `DOCS=docs/cli.md,README.md` runs only those pages. How examples are written:
 * docs/testing.md, "Writing docs examples".
 */

import { assert } from "../_support/assert.ts";
import { spawnBroker } from "../_support/child.ts";
import { type Block, type Page, pagePaths, readPage } from "./markdown.ts";
import { GoModule, runTs } from "./programs.ts";
import { runShellBlock } from "./shell.ts";
import { topicNamesOf } from "./topic_names.ts";

const only = Deno.env.get("DOCS")?.split(",").map((p) => p.trim()).filter(Boolean);
const runnable = (b: Block) => !b.norun && (b.lang === "sh" || b.lang === "ts" || b.lang === "go");

/** The ```output block right after block `i`, as text. */
function shownOutput(blocks: Block[], i: number): string | undefined {
  const next = blocks[i + 1];
  return next?.lang === "output" ? next.lines.join("\n") : undefined;
}

/**
 * Topics the page's examples left in the broker (its `<topic>.wal` files) that
 * tests/docs/topic_names.ts does not find in the page, so topic_names_test.ts cannot see them.
 */
async function unnamedTopics(page: Page, dataDir: string): Promise<string[]> {
  const named = topicNamesOf(page);
  const problems: string[] = [];
  for await (const e of Deno.readDir(dataDir)) {
    const topic = e.name.replace(/\.wal$/, "");
    if (topic === e.name || named.has(topic) || named.has(topic.replace(/\.dlq$/, ""))) continue;
    problems.push(
      `${page.path}: its examples made topic "${topic}", which tests/docs/topic_names.ts does not ` +
        "find in the page: name it in a way topic_names.ts reads, or teach it this one",
    );
  }
  return problems;
}

async function runPage(page: Page): Promise<string[]> {
  const scratch = await Deno.makeTempDir({ prefix: "ferry-docs-" });
  const dirs = { data: `${scratch}/data`, work: `${scratch}/work`, state: `${scratch}/state` };
  for (const d of Object.values(dirs)) await Deno.mkdir(d);
  const broker = await spawnBroker({ dataDir: dirs.data, env: page.env });
  const go = new GoModule(`${scratch}/go`);
  await Deno.mkdir(`${scratch}/go`);
  try {
    for (const [i, block] of page.blocks.entries()) {
      if (!runnable(block)) continue;
      const where = `${page.path}:${block.line}`;
      if (block.lang === "sh") {
        const problems = await runShellBlock(block, {
          page: page.path,
          brokerUrl: broker.url,
          workDir: dirs.work,
          stateDir: dirs.state,
        });
        if (problems.length) return problems;
      } else {
        const code = block.lines.join("\n");
        const shown = shownOutput(page.blocks, i);
        const problem = block.lang === "ts"
          ? await runTs(code, broker.url, shown)
          : await go.run(code, broker.url, shown);
        if (problem) return [`${where}: the ${block.lang} program: ${problem}`];
      }
    }
    return await unnamedTopics(page, dirs.data);
  } finally {
    broker.kill("SIGTERM");
    await broker.exited;
    await Deno.remove(scratch, { recursive: true });
  }
}

for (const path of await pagePaths()) {
  if (only && !only.includes(path)) continue;
  const page = await readPage(path);
  if (!page.blocks.some(runnable)) continue;
  Deno.test(`docs: the examples of ${path} run as shown`, async () => {
    const problems = await runPage(page);
    assert(problems.length === 0, problems.join("\n\n"));
  });
}
