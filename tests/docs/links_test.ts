/**
 * Every relative link of README.md and docs/ resolves: the file (or folder) exists, and an
 * `#anchor` is a heading of the page it points into, by GitHub's rule.
 */

import { assert } from "../_support/assert.ts";
import { anchorsOf, linksOf, pagePaths, ROOT } from "./markdown.ts";

Deno.test("docs: every relative link and anchor of README.md and docs/ resolves", async () => {
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = async (path: string) => {
    if (!anchors.has(path)) anchors.set(path, anchorsOf(await Deno.readTextFile(ROOT + path)));
    return anchors.get(path)!;
  };
  const broken: string[] = [];
  for (const page of await pagePaths()) {
    const text = await Deno.readTextFile(ROOT + page);
    for (const { line, target } of linksOf(text)) {
      const [file, anchor] = target.split("#", 2) as [string, string | undefined];
      const path = file
        ? new URL(decodeURI(file), `file://${ROOT}${page}`).pathname.slice(ROOT.length)
        : page;
      const stat = await Deno.stat(ROOT + path).catch(() => undefined);
      if (!stat) broken.push(`${page}:${line}: ${target}: no such file`);
      else if (anchor && path.endsWith(".md") && !(await anchorsIn(path)).has(anchor)) {
        broken.push(`${page}:${line}: ${target}: no heading "#${anchor}" in ${path}`);
      }
    }
  }
  assert(broken.length === 0, `broken links:\n${broken.join("\n")}`);
});

/** Pages (with anchors) a newcomer must reach from README.md by links alone, in two clicks. */
const JOURNEYS = [
  "docs/api/topics-and-groups.md#delete-a-topic",
  "docs/go-client.md#verifying-webhook-signatures",
  "docs/cluster.md#add-a-node",
];

Deno.test("docs: from README.md, two links reach deleting a topic, Go signatures, adding a node", async () => {
  /** Every target one page links to, as "path#anchor" and "path", from the root. */
  const targetsOf = async (page: string) => {
    const text = await Deno.readTextFile(ROOT + page);
    return linksOf(text).flatMap(({ target }) => {
      const [file, anchor] = target.split("#", 2) as [string, string | undefined];
      const path = file
        ? new URL(decodeURI(file), `file://${ROOT}${page}`).pathname.slice(ROOT.length)
        : page;
      return anchor ? [`${path}#${anchor}`, path] : [path];
    });
  };
  const reached = new Set<string>(["README.md"]);
  let frontier = ["README.md"];
  for (let click = 0; click < 2; click++) {
    const next: string[] = [];
    for (const page of frontier) {
      for (const t of await targetsOf(page)) {
        if (reached.has(t)) continue;
        reached.add(t);
        if (t.endsWith(".md")) next.push(t);
      }
    }
    frontier = next;
  }
  for (const journey of JOURNEYS) assert(reached.has(journey), `${journey} is not two links away`);
});
