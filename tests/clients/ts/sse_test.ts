/** SseParser: the event-stream format as the HTML standard parses it, fed in awkward chunks. */

import { assertEquals } from "../../_support/assert.ts";
import { SseParser } from "../../../clients/ts/sse.ts";

/** Feeds `text` cut at every position in `cuts`, returning every event. */
function parse(text: string, cuts: number[] = [], lastEventId = "") {
  const p = new SseParser(lastEventId);
  const out = [];
  let at = 0;
  for (const cut of [...cuts, text.length]) {
    out.push(...p.feed(text.slice(at, cut)));
    at = cut;
  }
  return out;
}

Deno.test("SseParser reads id, event and data lines, skips comments, and keeps the last id", () => {
  const text = ': ping\n\nid: 7\ndata: {"a":1}\n\nevent: reset\ndata: {"reason":"gap"}\n\n' +
    "data: no id\n\n";
  assertEquals(parse(text), [
    { type: "message", data: '{"a":1}', lastEventId: "7" },
    { type: "reset", data: '{"reason":"gap"}', lastEventId: "7" },
    { type: "message", data: "no id", lastEventId: "7" },
  ]);
});

Deno.test("SseParser gives the same events whatever the chunking and line endings", () => {
  const events = [
    { type: "message", data: "one\ntwo", lastEventId: "1" },
    { type: "message", data: "three", lastEventId: "2" },
  ];
  for (const eol of ["\n", "\r\n", "\r"]) {
    const text = ["id: 1", "data: one", "data: two", "", "id:2", "data:three", "", ""].join(eol);
    for (let cut = 0; cut <= text.length; cut++) {
      assertEquals(parse(text, [cut]), events, `eol ${JSON.stringify(eol)}, cut at ${cut}`);
    }
  }
});

Deno.test("SseParser skips events without data, ids holding NUL, and unknown fields; resumes from a given id", () => {
  const text = "id: 5\n\nid: bad\0id\nretry: 10\nfoo: bar\ndata\n\n";
  assertEquals(parse(text, [], "3"), [{ type: "message", data: "", lastEventId: "5" }]);
  assertEquals(parse("data: x\n\n", [], "41"), [{
    type: "message",
    data: "x",
    lastEventId: "41",
  }]);
});
