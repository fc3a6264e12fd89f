import { assert, assertEquals } from "../../_support/assert.ts";
import { exposedGc, IdleGc } from "../../../lib/memory/idle_gc.ts";

/** An IdleGc on the real timer over a heap the test sets; its decisions are heard as promises. */
function idleGc(growthBytes = 100) {
  let heap = 1_000;
  let held = 500;
  const collections: number[] = [];
  let decided = Promise.withResolvers<boolean>();
  const gc = new IdleGc({
    collect: () => {
      collections.push(heap);
      heap = 1_010; // what the collection left
    },
    used: () => heap,
    held: () => held,
    idleMs: 5,
    growthBytes,
    onIdle: (collected) => {
      decided.resolve(collected);
      decided = Promise.withResolvers<boolean>();
    },
  });
  return {
    gc,
    collections,
    setHeap: (n: number) => heap = n,
    setHeld: (n: number) => held = n,
    next: () => decided.promise,
  };
}

Deno.test("IdleGc collects once the requests stop, when the heap grew enough", async () => {
  const t = idleGc();
  t.setHeap(1_200);
  t.gc.touch();
  assertEquals(await t.next(), true);
  assertEquals(t.collections, [1_200]);
  // The floor is now what the collection left: 60 more bytes are not worth another.
  t.setHeap(1_070);
  t.gc.touch();
  assertEquals(await t.next(), false);
  assertEquals(t.collections.length, 1);
  t.gc.stop();
});

Deno.test("IdleGc leaves a heap alone that grew less than the threshold", async () => {
  const t = idleGc();
  t.setHeap(1_099);
  t.gc.touch();
  assertEquals(await t.next(), false);
  assertEquals(t.collections, []);
  t.gc.stop();
});

Deno.test("IdleGc decides only after a whole idle wait without a finished request", async () => {
  const t = idleGc();
  t.setHeap(5_000);
  let touches = 0, lastTouch = 0;
  const touch = () => {
    lastTouch = performance.now();
    t.gc.touch();
  };
  const busy = setInterval(() => {
    if (++touches <= 10) touch();
  }, 1);
  touch();
  assertEquals(await t.next(), true);
  const decidedAt = performance.now();
  clearInterval(busy);
  // Timers count whole milliseconds: one early is on time.
  assert(decidedAt - lastTouch >= 4, `decided ${decidedAt - lastTouch} ms after a touch`);
  t.gc.stop();
});

Deno.test("IdleGc follows the heap down when V8 collected on its own", async () => {
  const t = idleGc();
  t.setHeap(950); // below the floor taken at construction
  t.gc.touch();
  assertEquals(await t.next(), false);
  t.setHeap(1_060); // 110 above the new floor
  t.gc.touch();
  assertEquals(await t.next(), true);
  t.gc.stop();
});

Deno.test("IdleGc collects when the messages held shrank since their peak, the heap unchanged", async () => {
  const t = idleGc();
  t.setHeld(1_500); // held more since construction: the peak follows it up
  t.gc.touch();
  assertEquals(await t.next(), false);
  t.setHeld(1_450); // 50 freed: below the threshold
  t.gc.touch();
  assertEquals(await t.next(), false);
  t.setHeld(1_390); // 110 below the peak of 1,500
  t.gc.touch();
  assertEquals(await t.next(), true);
  assertEquals(t.collections, [1_000]);
  t.gc.touch(); // measured from what was held at that collection now
  assertEquals(await t.next(), false);
  t.gc.stop();
});

Deno.test("exposedGc() is there only with --expose-gc", async () => {
  assertEquals(exposedGc(), undefined); // the test runner does not pass it
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      "--v8-flags=--expose-gc",
      `import { exposedGc } from ${
        JSON.stringify(new URL("../../../lib/memory/idle_gc.ts", import.meta.url).href)
      };
       const gc = exposedGc(); gc?.(); console.log(typeof gc);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert(out.success);
  assertEquals(new TextDecoder().decode(out.stdout).trim(), "function");
});

Deno.test("IdleGc counts ArrayBuffers: 64 MiB of dropped request bodies are collected once idle", async () => {
  // V8's own figures, in a process with `gc` exposed: what the broker runs with.
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      "--v8-flags=--expose-gc",
      `import { exposedGc, IdleGc } from ${
        JSON.stringify(new URL("../../../lib/memory/idle_gc.ts", import.meta.url).href)
      };
       const decided = Promise.withResolvers();
       const gc = new IdleGc({ collect: exposedGc(), idleMs: 5, onIdle: (c) => decided.resolve(c) });
       let bodies = Array.from({ length: 32 }, () => new Uint8Array(2 * 1024 * 1024).fill(1));
       bodies = undefined;
       gc.touch();
       const before = Deno.memoryUsage().external;
       const collected = await decided.promise;
       console.log(JSON.stringify({ collected, freed: before - Deno.memoryUsage().external }));`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert(out.success);
  const { collected, freed } = JSON.parse(new TextDecoder().decode(out.stdout));
  assertEquals(collected, true);
  assert(freed >= 60 * 1024 * 1024, `freed ${freed} bytes`);
});
