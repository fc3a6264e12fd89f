import { assertEquals, assertThrows } from "../../_support/assert.ts";
import { loadConfig } from "../../../lib/config.ts";
import { BrokerError } from "../../../lib/errors.ts";
import { heldSize, MemoryBudget, MESSAGE_OVERHEAD_BYTES } from "../../../lib/memory/budget.ts";

const MIB = 1024 * 1024;

Deno.test("MemoryBudget.admit() refuses what would pass the budget, counting the overhead", () => {
  const m = new MemoryBudget(4 * MIB);
  m.admit("t", 4 * MIB - MESSAGE_OVERHEAD_BYTES); // exactly fits
  m.add(heldSize(2 * MIB));
  m.admit("t", 2 * MIB - 2 * MESSAGE_OVERHEAD_BYTES);
  const e = assertThrows(() => m.admit("t", 2 * MIB), "memory_full") as BrokerError;
  assertEquals(e.retryAfterSeconds! >= 1, true);
  m.release(heldSize(2 * MIB));
  m.admit("t", 2 * MIB);
});

Deno.test("MemoryBudget's Retry-After follows the drain rate", () => {
  const m = new MemoryBudget(10 * MIB);
  m.add(10 * MIB);
  m.tick(0);
  // Consumers free 1 MiB/s for ten seconds: the smoothed rate approaches 1 MiB/s.
  for (let s = 1; s <= 10; s++) {
    m.release(MIB);
    m.add(MIB); // and publishers take it again
    m.tick(s * 1000);
  }
  const e = assertThrows(() => m.admit("t", 4 * MIB), "memory_full") as BrokerError;
  // 4 MiB + overhead over the budget at ~1 MiB/s: about 5 s.
  assertEquals(
    e.retryAfterSeconds! >= 4 && e.retryAfterSeconds! <= 6,
    true,
    `${e.retryAfterSeconds}`,
  );
  const idle = new MemoryBudget(MIB);
  idle.add(MIB);
  const stuck = assertThrows(() => idle.admit("t", 1), "memory_full") as BrokerError;
  assertEquals(stuck.retryAfterSeconds, 15, "no drain seen: a quarter of the longest wait");
});

Deno.test("BROKER_MAX_MEMORY takes sizes, bytes and a share of physical memory", () => {
  const of = (v: string) => loadConfig({ BROKER_MAX_MEMORY: v }).maxMemoryBytes;
  assertEquals(of("512MiB"), 512 * MIB);
  assertEquals(of("4GiB"), 4 * 1024 * MIB);
  assertEquals(of("1048576"), MIB);
  assertEquals(of("10%"), Math.floor(Deno.systemMemoryInfo().total / 10));
  assertEquals(loadConfig({}).maxMemoryBytes, Math.floor(Deno.systemMemoryInfo().total * 0.4));
});

Deno.test("MemoryBudget.reserve() admits a declared body and holds only the bytes that arrive", () => {
  const m = new MemoryBudget(4 * MIB);
  m.tick(0);
  let refused = 0;
  assertThrows(() => m.reserve("t", 4 * MIB, () => refused++), "memory_full");
  const hold = m.reserve("t", 3 * MIB, () => refused++);
  assertEquals(m.held, 0, "what is declared is not held");
  hold.add(MIB);
  hold.add(MIB);
  assertEquals(m.held, 2 * MIB);
  assertThrows(() => hold.add(2 * MIB + 1), "memory_full");
  assertEquals([m.held, refused], [2 * MIB, 2]);
  hold.release();
  hold.release(); // twice is once
  assertEquals(m.held, 0);
  m.tick(1000);
  assertEquals(m.drainRate, 0, "a body given back is not consumers freeing memory");
});
