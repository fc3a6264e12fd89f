/**
 * PayloadGenerations on its own: the offset mapping of the last swap at its edges, which the
 * FileWal and contract tests reach only for one payload appended during a compaction.
 */

import { assert, assertEquals, assertThrows } from "../../_support/assert.ts";
import { PayloadFile } from "../../../lib/memory/payload_file.ts";
import { PayloadGenerations } from "../../../lib/storage/payload_generations.ts";

async function reader(): Promise<{ file: PayloadFile; path: string }> {
  const path = await Deno.makeTempFile();
  return { file: PayloadFile.open(path), path };
}

Deno.test("PayloadGenerations.locate() before any swap: the current file, or nothing", async () => {
  const g = new PayloadGenerations();
  assertEquals(g.locate(0, 100, 0), undefined, "no file open yet");
  const { file, path } = await reader();
  g.current = file;
  assertEquals(g.locate(0, 100, 0), { file, offset: 100 });
  assertEquals(g.locate(1, 100, 0), undefined, "an unknown generation");
  await g.close();
  await Deno.remove(path);
});

Deno.test("PayloadGenerations after a swap: frames captured during it move, older ones do not", async () => {
  const g = new PayloadGenerations();
  const old = await reader(), next = await reader();
  g.current = old.file;
  // The old file was 1000 B long at the snapshot; the snapshot wrote 300 B to the new file.
  g.swap(0, next.file, 1000, 300);
  assertEquals(g.current, next.file);
  assertEquals(g.locate(1, 50, 1), { file: next.file, offset: 50 }, "the current generation");
  assertEquals(g.locate(0, 1200, 1), { file: next.file, offset: 500 }, "captured: moved");
  assertEquals(g.locate(0, 1000, 1), { file: next.file, offset: 300 }, "the first captured byte");
  assertEquals(g.locate(0, 999, 1), undefined, "in the snapshot: left to the compactor");
  assertEquals(g.rebase({ file: old.file, offset: 1200 }), { file: next.file, offset: 500 });
  assertEquals(g.rebase({ file: old.file, offset: 999 }), undefined);
  assertEquals(g.rebase({ file: next.file, offset: 1200 }), undefined, "not the replaced file");
  // A second swap forgets the first: generation 0 is no longer mapped.
  const third = await reader();
  g.swap(1, third.file, 2000, 700);
  assertEquals(g.locate(0, 1200, 2), undefined);
  assertEquals(g.locate(1, 2100, 2), { file: third.file, offset: 800 });
  await g.close();
  for (const r of [old, next, third]) await Deno.remove(r.path);
});

Deno.test("PayloadGenerations.releaseRetired() closes replaced readers and empties old writers", async () => {
  const replayed = await reader();
  const g = new PayloadGenerations(replayed.file);
  const old = await reader(), next = await reader();
  await Deno.writeFile(old.path, new Uint8Array(4096).fill(1));
  g.current = old.file;
  g.swap(0, next.file, 16, 16);
  const writer = await Deno.open(old.path, { write: true });
  g.retireWriter(writer);
  g.releaseRetired();
  for (const f of [replayed.file, old.file]) {
    const e = assertThrows(() => f.read(0, 1));
    assert(e.message.includes("closed"), `the replaced readers are closed: ${e.message}`);
  }
  await g.close(); // waits for the old writer to be emptied and closed
  assertEquals((await Deno.stat(old.path)).size, 0, "the replaced file is emptied");
  assert(g.current === next.file);
  for (const r of [replayed, old, next]) await Deno.remove(r.path);
});
