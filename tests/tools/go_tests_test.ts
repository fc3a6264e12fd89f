/** tools/go_tests.ts: how `go test -json` events become the suite's counts. */

import { assertEquals } from "../_support/assert.ts";
import { countGoEvents } from "../../tools/go_tests.ts";

Deno.test("countGoEvents() counts tests, subtests and examples, not packages or output", () => {
  const events = [
    { Action: "run", Test: "TestA" },
    { Action: "output", Test: "TestA", Output: "--- PASS: TestA/one (0.00s)\n" },
    { Action: "pass", Test: "TestA/one" },
    { Action: "fail", Test: "TestA/two" },
    { Action: "skip", Test: "TestA/three" },
    { Action: "fail", Test: "TestA" },
    { Action: "pass", Test: "Example" },
    { Action: "fail" },
    { Action: "skip" },
  ];
  assertEquals(countGoEvents(events), { passed: 2, failed: 2, skipped: 1 });
});
