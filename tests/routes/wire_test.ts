import { assertEquals } from "../_support/assert.ts";
import { isoTime } from "../../routes/wire.ts";

Deno.test("isoTime() equals Date.prototype.toISOString for any millisecond", () => {
  const samples = [0, 1, 9, 10, 99, 100, 999, 1000, 1_700_000_000_000, 1_700_000_000_007];
  for (let i = 0; i < 2000; i++) samples.push(Math.floor(Math.random() * 4_102_444_800_000));
  for (const ms of [...samples, ...samples.map((m) => m + 1)]) {
    assertEquals(isoTime(ms), new Date(ms).toISOString(), `at ${ms}`);
  }
});
