import { age, messageBlock, relative, size, span } from "../../cli/format.ts";
import { Output } from "../../cli/output.ts";
import { table } from "../../cli/table.ts";
import { assertEquals } from "../_support/assert.ts";

const plain = new Output(false, false).paint;

Deno.test("span() gives the two largest units, rounded down", () => {
  assertEquals(span(0), "0ms");
  assertEquals(span(250), "250ms");
  assertEquals(span(3_000), "3s");
  assertEquals(span(252_000), "4m 12s");
  assertEquals(span(3_600_000), "1h");
  assertEquals(span(7_500_000), "2h 5m");
  assertEquals(span(90_061_000), "1d 1h");
});

Deno.test("relative() says how long ago, or how long until", () => {
  const now = Date.parse("2026-11-22T12:00:00Z");
  assertEquals(relative("2026-11-22T11:59:57Z", now), "3s ago");
  assertEquals(relative("2026-11-22T11:55:00Z", now), "5m ago");
  assertEquals(relative("2026-11-22T12:00:00.400Z", now), "just now");
  assertEquals(relative("2026-11-22T13:00:00Z", now), "in 1h");
  assertEquals(relative("not a time", now), "not a time");
  assertEquals(age(125), "2m ago");
  assertEquals(age(5, false), "-");
});

Deno.test("size() writes bytes in binary units", () => {
  assertEquals(size(512), "512 B");
  assertEquals(size(1536), "1.5 KiB");
  assertEquals(size(20 * 1024 * 1024), "20 MiB");
});

Deno.test("table() aligns columns, numbers to the right, with no trailing spaces", () => {
  const text = table(
    [{ head: "TOPIC" }, { head: "DEPTH", numeric: true }, { head: "NOTE" }],
    [["orders", 3, ""], ["a", 12345, "x"]],
    plain,
  );
  assertEquals(text.split("\n"), [
    "TOPIC   DEPTH  NOTE",
    "orders      3",
    "a       12345  x",
  ]);
  assertEquals(table([{ head: "X" }], [], plain, "nothing"), "nothing");
});

Deno.test("messageBlock() shows the facts, the X-MQ headers and the text payload", () => {
  const now = Date.parse("2026-11-22T12:00:10Z");
  const block = messageBlock(
    {
      id: "0193",
      topic: "orders",
      payload: "aGkK",
      payload_text: "hi\n",
      timestamp: "2026-11-22T12:00:00Z",
      retry_count: 2,
      headers: { "x-mq-trace": "t-1" },
      priority: "high",
    },
    plain,
    now,
  );
  assertEquals(block.split("\n"), [
    "0193  orders  10s ago  retry 2  high",
    "x-mq-trace: t-1",
    "hi",
  ]);
  const binary = messageBlock(
    {
      id: "0194",
      topic: "orders",
      payload: "AAEC",
      timestamp: "2026-11-22T12:00:00Z",
      retry_count: 0,
      headers: {},
      priority: "normal",
    },
    plain,
    now,
  );
  assertEquals(binary.split("\n")[1], "(3 B of binary; --json shows it)");
});
