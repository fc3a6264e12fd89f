import { assertEquals } from "../_support/assert.ts";
import type { Published } from "../../lib/broker.ts";
import { batchAnswerText, isoTime, publishedJson } from "../../routes/wire.ts";

Deno.test("isoTime() equals Date.prototype.toISOString for any millisecond", () => {
  const samples = [0, 1, 9, 10, 99, 100, 999, 1000, 1_700_000_000_000, 1_700_000_000_007];
  for (let i = 0; i < 2000; i++) samples.push(Math.floor(Math.random() * 4_102_444_800_000));
  for (const ms of [...samples, ...samples.map((m) => m + 1)]) {
    assertEquals(isoTime(ms), new Date(ms).toISOString(), `at ${ms}`);
  }
});

Deno.test("batchAnswerText() writes what JSON.stringify of the publish answers does", () => {
  const t = Date.UTC(2026, 10, 23, 1, 2, 3, 45);
  const results: Published[] = [
    {
      id: "0190b8a2-0000-7000-8000-000000000001",
      topic: "orders.eu-1_x",
      timestamp: t,
      priority: 1,
      deduplicated: false,
      visibleAt: 0,
      expiresAt: 0,
    },
    {
      id: "0190b8a2-0000-7000-8000-000000000002",
      topic: "orders.eu-1_x",
      timestamp: t + 7,
      priority: 0,
      deduplicated: false,
      visibleAt: t + 5_000,
      expiresAt: t + 60_000,
    },
    {
      id: "0190b8a2-0000-7000-8000-000000000001",
      topic: "orders.eu-1_x",
      timestamp: t - 999,
      priority: 2,
      deduplicated: true,
      visibleAt: 0,
      expiresAt: t + 1,
    },
  ];
  for (const list of [results, results.slice(0, 1), []]) {
    assertEquals(batchAnswerText(list), JSON.stringify({ messages: list.map(publishedJson) }));
  }
});
