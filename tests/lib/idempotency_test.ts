import { assertEquals } from "../_support/assert.ts";
import { IDEMPOTENCY_WINDOW_MS as W } from "../../lib/config.ts";
import { autoKey, IdempotencyKeys, keySize } from "../../lib/idempotency.ts";
import { heldSize, MemoryBudget } from "../../lib/memory/budget.ts";
import { bytes, memTopic, put, T0 } from "./_broker.ts";

/** Keys whose every hold() call is recorded. */
function recorded() {
  const holds: number[] = [];
  const keys = new IdempotencyKeys((b) => holds.push(b));
  return { keys, holds };
}

Deno.test("IdempotencyKeys.lookup() answers with the original inside the window, nothing from its end", () => {
  const { keys } = recorded();
  keys.keep("order-1", "m1", T0);
  assertEquals(keys.lookup("order-1", T0), { id: "m1", at: T0 });
  assertEquals(keys.lookup("order-1", T0 + W - 1), { id: "m1", at: T0 });
  assertEquals(keys.lookup("order-1", T0 + W), undefined);
  assertEquals(keys.lookup("order-2", T0), undefined);
  // Past its window a key is not answered even before expire() has dropped it.
  assertEquals(keys.size, 1);
});

Deno.test("IdempotencyKeys.live() is true strictly before at + IDEMPOTENCY_WINDOW_MS", () => {
  assertEquals(IdempotencyKeys.live(T0, T0 + W - 1), true);
  assertEquals(IdempotencyKeys.live(T0, T0 + W), false);
  assertEquals(IdempotencyKeys.live(T0, T0 - 1), true);
});

Deno.test("IdempotencyKeys.keep() holds keySize() once per key through the hold callback", () => {
  const { keys, holds } = recorded();
  keys.keep("a", "m1", T0);
  keys.keep("bb", "m2", T0 + 1);
  assertEquals(holds, [keySize("a"), keySize("bb")]);
  assertEquals(keys.bytes, keySize("a") + keySize("bb"));
  assertEquals(keySize("bb") - keySize("a"), 2, "two bytes per UTF-16 unit");
  // Keeping a key again points it at the new message without holding it twice.
  keys.keep("a", "m3", T0 + 2);
  assertEquals(holds.length, 2);
  assertEquals(keys.size, 2);
  assertEquals(keys.lookup("a", T0 + 2), { id: "m3", at: T0 + 2 });
});

Deno.test("IdempotencyKeys.expire() drops keys in publish order and stops at the first live one", () => {
  const { keys, holds } = recorded();
  keys.keep("a", "m1", T0);
  keys.keep("b", "m2", T0 + 10);
  keys.keep("c", "m3", T0 + 20);
  keys.expire(T0 + W - 1);
  assertEquals(keys.size, 3);
  keys.expire(T0 + 10 + W);
  assertEquals(keys.liveAt(T0).map(([k]) => k), ["c"]);
  assertEquals(holds.slice(3), [-keySize("a"), -keySize("b")]);
  assertEquals(keys.bytes, keySize("c"));
  keys.expire(T0 + 20 + W);
  assertEquals([keys.size, keys.bytes], [0, 0]);
});

Deno.test("IdempotencyKeys.liveAt() lists the keys inside their window, oldest first", () => {
  const { keys } = recorded();
  keys.keep("a", "m1", T0);
  keys.keep("b", "m2", T0 + 5);
  keys.keep("c", "m3", T0 + 9);
  assertEquals(keys.liveAt(T0 + 5 + W), [["c", { id: "m3", at: T0 + 9 }]]);
  assertEquals(keys.liveAt(T0 + W).map(([k]) => k), ["b", "c"]);
  assertEquals(keys.size, 3, "liveAt() only looks; nothing is dropped");
});

Deno.test("IdempotencyKeys of a Topic count against its MemoryBudget until they expire", async () => {
  const memory = new MemoryBudget(Infinity);
  const topic = memTopic("t", {}, memory);
  await put(topic, "m1", "x", T0, { idemKey: "order-1" });
  assertEquals(memory.held, heldSize(1) + keySize("order-1"));
  assertEquals(topic.heldBytes, memory.held);
  // Acking the message leaves the key for the rest of its window.
  topic.keys.expire(T0 + W - 1);
  assertEquals(topic.keys.lookup("order-1", T0 + W - 1)?.id, "m1");
  topic.keys.expire(T0 + W);
  assertEquals(memory.held, heldSize(1));
  assertEquals(topic.keys.size, 0);
});

Deno.test("autoKey() is the SHA-256 of the payload in hex", async () => {
  assertEquals(
    await autoKey(bytes("abc")),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  // a view into a larger buffer hashes only its own bytes
  assertEquals(await autoKey(bytes("xabcx").subarray(1, 4)), await autoKey(bytes("abc")));
  assertEquals(await autoKey(bytes("abd")) === await autoKey(bytes("abc")), false);
});

Deno.test({
  // Regression (found by this twin): keep() on a key still in the Map (its window over, not yet expired) updates it in
  // place, so it keeps its old position; expire() then stops at it while keys behind it, whose
  // windows have ended, stay held (and counted against the memory budget) for up to a window.
  name: "IdempotencyKeys.expire() frees a key whose window ended behind a key kept again",
  fn: () => {
    const { keys } = recorded();
    keys.keep("a", "m1", T0);
    keys.keep("b", "m2", T0 + 1);
    // "a" is out of its window and reused before any sweep dropped it: a fresh publish.
    assertEquals(keys.lookup("a", T0 + W), undefined);
    keys.keep("a", "m3", T0 + W);
    keys.expire(T0 + 1 + W); // "b"'s window has ended
    assertEquals(keys.liveAt(T0 + 1 + W).map(([k]) => k), ["a"]);
    assertEquals(keys.size, 1, "b is still held");
    assertEquals(keys.bytes, keySize("a"));
  },
});
