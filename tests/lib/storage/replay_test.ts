/**
 * lib/storage/replay.ts on real files: torn tails cut and kept, damage in the middle skipped by
 * resynchronising (the records after it survive), and unknown versions refused.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { Logger, silentLogger } from "../../../lib/log.ts";
import { FileWal } from "../../../lib/storage/file_wal.ts";
import { replayFile } from "../../../lib/storage/replay.ts";
import { FILE_HEADER_BYTES, RecordType, type WalRecord } from "../../../lib/storage/record.ts";

function key(seq: number): WalRecord {
  return { type: RecordType.Key, seq, key: `k${seq}`.padEnd(40, "."), id: `id${seq}`, at: seq };
}

async function replayAll(path: string, log = silentLogger) {
  const seen: number[] = [];
  const result = await replayFile(path, (r) => seen.push(r.seq), log);
  return { seen, result };
}

/** A file of `n` KEY records (seq 1..n) and the offset and size of each frame. */
async function walOf(n: number) {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "never", log: silentLogger });
  const frames: { offset: number; size: number }[] = [];
  for (let i = 1; i <= n; i++) {
    const offset = wal.bytes;
    const { durable, size } = wal.append(key(i));
    await durable;
    frames.push({ offset, size });
  }
  await wal.close();
  return { dir, path, frames, bytes: await Deno.readFile(path) };
}

/** The one `.cut-<ms>` file next to `path`. */
async function cutFile(dir: string): Promise<Uint8Array> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) if (e.name.includes(".cut-")) names.push(e.name);
  assertEquals(names.length, 1, `cut files: ${names}`);
  return await Deno.readFile(`${dir}/${names[0]}`);
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

Deno.test("replayFile() cuts a torn tail, logs it, and keeps every whole record", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  for (let i = 1; i <= 10; i++) await wal.append(key(i)).durable;
  await wal.close();
  const full = (await Deno.stat(path)).size;
  await Deno.truncate(path, full - 3); // the last record loses its end
  const lines: string[] = [];
  const { seen, result } = await replayAll(path, new Logger("warn", (l) => lines.push(l)));
  assertEquals(seen.length, 9);
  assert(result.cut?.includes("torn"), `cut reason: ${result.cut}`);
  assert(lines.some((l) => l.includes("WAL tail cut off")), "a warn line");
  assertEquals((await Deno.stat(path)).size, result.validBytes);
  assertEquals((await cutFile(dir)).length, full - 3 - result.validBytes, "the tail is kept");
  // The cut file takes new records after the surviving ones.
  const again = new FileWal(path, dir, result.validBytes, { fsync: "always", log: silentLogger });
  await again.append(key(11)).durable;
  await again.close();
  assertEquals((await replayAll(path)).seen, [1, 2, 3, 4, 5, 6, 7, 8, 9, 11]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() cuts a last record whose checksum fails", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "never", log: silentLogger });
  for (let i = 1; i <= 5; i++) await wal.append(key(i)).durable;
  await wal.close();
  const bytes = await Deno.readFile(path);
  bytes[bytes.length - 2]! ^= 0xff;
  await Deno.writeFile(path, bytes);
  const { seen, result } = await replayAll(path);
  assertEquals(seen, [1, 2, 3, 4]);
  assertEquals(result.cut, "checksum mismatch");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() refuses an unknown file version instead of losing data", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "never", log: silentLogger });
  await wal.append(key(1)).durable;
  await wal.close();
  const bytes = await Deno.readFile(path);
  bytes[8] = 9; // file version 9
  await Deno.writeFile(path, bytes);
  let error = "";
  await replayAll(path).catch((e) => error = e.message);
  assert(error.includes("unknown WAL format version 9"), error);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() skips a record with a flipped byte mid-file and keeps all after it", async () => {
  const { dir, path, frames, bytes } = await walOf(100);
  const bad = frames[49]!; // record 50
  const damaged = bytes.slice();
  damaged[bad.offset + bad.size - 3]! ^= 0x01;
  await Deno.writeFile(path, damaged);
  const lines: string[] = [];
  const { seen, result } = await replayAll(path, new Logger("warn", (l) => lines.push(l)));
  assertEquals(seen, [...range(1, 49), ...range(51, 100)]);
  assertEquals(result.skipped, [{
    offset: bad.offset,
    bytes: bad.size,
    reason: "checksum mismatch",
  }]);
  assertEquals(result.cut, undefined, "nothing was cut at the tail");
  const line = JSON.parse(lines.find((l) => l.includes("WAL damage skipped"))!);
  assertEquals([line.offset, line.bytes, line.reason], [bad.offset, bad.size, "checksum mismatch"]);
  assertEquals(await cutFile(dir), damaged.slice(bad.offset, bad.offset + bad.size));
  // The file was rewritten without the bad record: the next replay is clean.
  assertEquals((await Deno.stat(path)).size, bytes.length - bad.size);
  assertEquals(result.validBytes, bytes.length - bad.size);
  const again = await replayAll(path);
  assertEquals(again.seen, seen);
  assertEquals(again.result.skipped, []);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() resynchronises after a corrupt length and a zeroed block", async () => {
  const { dir, path, frames, bytes } = await walOf(60);
  const damaged = bytes.slice();
  const view = new DataView(damaged.buffer);
  view.setUint32(frames[9]!.offset, 0xfffffff0, true); // record 10: an impossible length
  view.setUint32(frames[19]!.offset, 1 << 20, true); // record 20: a length past the file's end
  damaged.fill(0, frames[29]!.offset + 5, frames[31]!.offset + 7); // records 30-32 zeroed
  await Deno.writeFile(path, damaged);
  const { seen, result } = await replayAll(path);
  assertEquals(seen, [...range(1, 9), ...range(11, 19), ...range(21, 29), ...range(33, 60)]);
  assertEquals(result.skipped.map((s) => s.offset), [10, 20, 30].map((n) => frames[n - 1]!.offset));
  assertEquals(result.skipped[2]!.bytes, frames[32]!.offset - frames[29]!.offset);
  assertEquals((await replayAll(path)).seen, seen);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() keeps a damaged middle and a torn tail in one cut file", async () => {
  const { dir, path, frames, bytes } = await walOf(20);
  const damaged = bytes.slice(0, bytes.length - 4); // record 20 torn
  damaged[frames[4]!.offset + 12]! ^= 0x80; // record 5
  await Deno.writeFile(path, damaged);
  const { seen, result } = await replayAll(path);
  assertEquals(seen, [...range(1, 4), ...range(6, 19)]);
  assert(result.cut?.includes("torn"), `cut: ${result.cut}`);
  assertEquals((await cutFile(dir)).length, frames[4]!.size + frames[19]!.size - 4);
  assertEquals(result.validBytes, bytes.length - frames[4]!.size - frames[19]!.size);
  assertEquals((await Deno.stat(path)).size, result.validBytes);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("replayFile() leaves an intact file untouched and writes no cut file", async () => {
  const { dir, path, bytes } = await walOf(30);
  const { seen, result } = await replayAll(path);
  assertEquals(seen, range(1, 30));
  assertEquals([result.skipped, result.validBytes], [[], bytes.length]);
  assertEquals(await Deno.readFile(path), bytes);
  const names = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  assertEquals(names, ["t.wal"]);
  assert(FILE_HEADER_BYTES < bytes.length);
  await Deno.remove(dir, { recursive: true });
});
