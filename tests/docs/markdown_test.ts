import { assertEquals } from "../_support/assert.ts";
import { anchorsOf, blocksOf, envOf, linksOf, slug } from "./markdown.ts";

Deno.test("markdown: blocks keep their language, norun and first line; list indents go", () => {
  const text =
    "# T\n\n```sh norun\ndeno task start\n```\n\n- item\n\n  ```ts\n  const a = 1;\n  ```\n";
  assertEquals(blocksOf(text), [
    { lang: "sh", norun: true, line: 4, lines: ["deno task start"] },
    { lang: "ts", norun: false, line: 10, lines: ["const a = 1;"] },
  ]);
});

Deno.test("markdown: anchors follow GitHub's rule, links skip code and absolute URLs", () => {
  assertEquals(
    slug("Batch publish: `POST /publish/{topic}/batch`"),
    "batch-publish-post-publishtopicbatch",
  );
  assertEquals(slug("Delete a topic"), "delete-a-topic");
  assertEquals([...anchorsOf("# A\n## A\n```\n# not\n```\n")], ["a", "a-1"]);
  assertEquals(
    linksOf("[x](a.md#b) `[y](no.md)` [z](https://e.org) ![i](p.png)\n```\n[c](no.md)\n```"),
    [{ line: 1, target: "a.md#b" }, { line: 1, target: "p.png" }],
  );
  assertEquals(envOf("<!-- docs:test env A=1 B=x:y,z -->"), { A: "1", B: "x:y,z" });
  assertEquals(envOf("```text\n<!-- docs:test env A=1 -->\n```\n"), {}, "not from a code block");
});
