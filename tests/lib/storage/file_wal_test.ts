import { assert, assertEquals } from "../../_support/assert.ts";
import { Logger, silentLogger } from "../../../lib/log.ts";
import { FileWal } from "../../../lib/storage/file_wal.ts";
import { replayFile } from "../../../lib/storage/replay.ts";
import { encodeRecord, RecordType, type WalRecord } from "../../../lib/storage/record.ts";
import { fillUp, mountTmpfs, TMPFS_MOUNTS, unmountTmpfs } from "../../_support/tmpfs.ts";
import { publishRecord } from "../_broker.ts";

function key(seq: number): WalRecord {
  return { type: RecordType.Key, seq, key: `k${seq}`, id: `id${seq}`, at: seq };
}

async function replayAll(path: string, log = silentLogger) {
  const seen: number[] = [];
  const result = await replayFile(path, (r) => seen.push(r.seq), log);
  return { seen, result };
}

Deno.test("FileWal.append() shares one fsync among concurrent appends (group commit)", async () => {
  const dir = await Deno.makeTempDir();
  const fsyncs: number[] = [];
  const wal = new FileWal(`${dir}/t.wal`, dir, 0, {
    fsync: "always",
    log: silentLogger,
    onFsync: (s) => fsyncs.push(s),
  });
  // 200 appends issued in one turn: the first flush carries one, the next carries the rest.
  await Promise.all(Array.from({ length: 200 }, (_, i) => wal.append(key(i + 1)).durable));
  await wal.close();
  assert(fsyncs.length <= 3, `expected group commit, got ${fsyncs.length} fsyncs`);
  const { seen, result } = await replayAll(`${dir}/t.wal`);
  assertEquals(seen, Array.from({ length: 200 }, (_, i) => i + 1));
  assertEquals(result.cut, undefined);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("FileWal.compact() keeps records appended while it runs", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  for (let i = 1; i <= 100; i++) await wal.append(key(i)).durable;
  // Snapshot: only the last 10 keys still matter. Appends race with the compaction.
  const racing: Promise<void>[] = [];
  const compaction = wal.compact(() => {
    queueMicrotask(() => {
      for (let i = 101; i <= 150; i++) racing.push(wal.append(key(i)).durable);
    });
    return [Array.from({ length: 10 }, (_, i) => encodeRecord(key(91 + i)))];
  });
  await compaction;
  await Promise.all(racing);
  for (let i = 151; i <= 160; i++) await wal.append(key(i)).durable;
  await wal.close();
  const { seen } = await replayAll(path);
  const expected = [...Array.from({ length: 10 }, (_, i) => 91 + i)];
  for (let i = 101; i <= 160; i++) expected.push(i);
  assertEquals(seen, expected);
  await Deno.remove(dir, { recursive: true });
});

/** Sizes of the files this process holds open that were deleted (replaced) under `path`. */
async function replacedOpen(path: string): Promise<number[]> {
  const sizes: number[] = [];
  for await (const e of Deno.readDir("/proc/self/fd")) {
    const link = await Deno.readLink(`/proc/self/fd/${e.name}`).catch(() => "");
    if (link === `${path} (deleted)`) {
      sizes.push((await Deno.stat(`/proc/self/fd/${e.name}`).catch(() => ({ size: -1 }))).size);
    }
  }
  return sizes;
}

Deno.test("FileWal.releaseRetired() lets go of a replaced file, and close() waits until it has", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  for (let i = 1; i <= 100; i++) await wal.append(key(i)).durable;
  await wal.compact(() => [[encodeRecord(key(100))]]);
  // Until released, the replaced file stays readable whole (payloads may still be read from it).
  const held = await replacedOpen(path);
  assert(held.length >= 1 && held.every((s) => s > 1_000), `replaced file held: ${held}`);
  wal.releaseRetired();
  await wal.close(); // waits for the emptying
  assertEquals(await replacedOpen(path), []);
  assertEquals((await replayAll(path)).seen, [100]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("FileWal.append(frame, after) writes the frame only once `after` settles, earlier frames first", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const before = wal.append(key(1)).durable;
  const gated = wal.append(key(2), gate).durable;
  const later = wal.append(key(3)).durable;
  await before; // not held back by the gate behind it
  assertEquals((await replayAll(path)).seen, [1]);
  let laterDone = false;
  later.then(() => laterDone = true);
  await new Promise((r) => setTimeout(r, 0));
  assertEquals(laterDone, false, "a frame queued after a gated one waits too");
  release();
  await Promise.all([gated, later]);
  await wal.close();
  assertEquals((await replayAll(path)).seen, [1, 2, 3]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("FileWal opens an empty file by writing its header; barrier() then resolves", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  await Deno.writeFile(path, new Uint8Array());
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  await wal.barrier();
  await wal.append(key(1)).durable;
  await wal.close();
  assertEquals((await replayAll(path)).seen, [1]);
  await Deno.remove(dir, { recursive: true });
});

/** The file's size, and whether every byte from `from` on is zero. */
async function tail(path: string, from: number): Promise<{ size: number; zeros: boolean }> {
  const bytes = await Deno.readFile(path);
  return { size: bytes.length, zeros: bytes.subarray(from).every((b) => b === 0) };
}

Deno.test("FileWal zero-fills ahead of small, frequent commits; close and replay cut the zeros", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  let wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  for (let i = 1; i <= 100; i++) await wal.append(key(i)).durable; // one commit each
  const logical = wal.bytes;
  const before = await tail(path, logical);
  assert(before.size >= logical + 512 * 1024, `a zero-filled stretch: ${before.size} B`);
  assert(before.zeros, "only zeros after the log's end");
  const crashed = `${dir}/crashed.wal`; // the file as a crash would leave it
  await Deno.copyFile(path, crashed);
  await wal.close();
  assertEquals((await Deno.stat(path)).size, logical, "a clean close cuts the zeros");

  const warned: string[] = [];
  const { seen, result } = await replayAll(crashed, new Logger("warn", (l) => warned.push(l)));
  assertEquals(seen, Array.from({ length: 100 }, (_, i) => i + 1));
  assertEquals([result.validBytes, result.skipped, result.cut], [logical, [], undefined]);
  assertEquals(warned, []);
  assertEquals((await Deno.stat(crashed)).size, logical, "replay cuts the zeros");
  assertEquals(
    (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort(),
    ["crashed.wal", "t.wal"],
    "no cut file",
  );

  // After the crash, appends land where the log ended.
  wal = new FileWal(crashed, dir, result.validBytes, { fsync: "always", log: silentLogger });
  for (let i = 101; i <= 110; i++) await wal.append(key(i)).durable;
  await wal.close();
  assertEquals((await replayAll(crashed)).seen, Array.from({ length: 110 }, (_, i) => i + 1));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("FileWal appends plainly for large commits, and without fsync=always", async () => {
  const dir = await Deno.makeTempDir();
  const big = (seq: number): WalRecord => ({
    type: RecordType.Key,
    seq,
    key: "k".repeat(16 * 1024),
    id: `id${seq}`,
    at: seq,
  });
  for (
    const [name, fsync, record] of [["big", "always", big], ["interval", "interval", key]] as const
  ) {
    const path = `${dir}/${name}.wal`;
    const wal = new FileWal(path, dir, 0, { fsync, log: silentLogger });
    for (let i = 1; i <= 100; i++) await wal.append(record(i)).durable;
    assertEquals((await tail(path, 0)).size, wal.bytes, `${name}: no zeros after the log`);
    await wal.close();
    assertEquals((await replayAll(path)).seen.length, 100);
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test("FileWal.compact() starts the new file without zeros, and fills it once commits are frequent", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/t.wal`;
  const wal = new FileWal(path, dir, 0, { fsync: "always", log: silentLogger });
  for (let i = 1; i <= 100; i++) await wal.append(key(i)).durable;
  await wal.compact(() => [[encodeRecord(key(100))]]);
  assertEquals((await tail(path, 0)).size, wal.bytes, "the compacted file ends at its log");
  for (let i = 101; i <= 200; i++) await wal.append(key(i)).durable;
  const after = await tail(path, wal.bytes);
  assert(after.size > wal.bytes && after.zeros, "zero-filled again");
  await wal.close();
  assertEquals(
    (await replayAll(path)).seen,
    Array.from({ length: 101 }, (_, i) => 100 + i),
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test({
  name: "FileWal: a write that finds the disk full (ENOSPC) does not fail the log; its records " +
    "wait and are written once there is room",
  ignore: !TMPFS_MOUNTS,
  async fn() {
    const mnt = await mountTmpfs("1m");
    assert(mnt, "mount -t tmpfs is not permitted here");
    try {
      const path = `${mnt}/t.wal`;
      let heard!: () => void;
      const noSpace = new Promise<void>((res) => heard = res);
      const wal = new FileWal(path, mnt, 0, {
        fsync: "always",
        log: silentLogger,
        onNoSpace: () => heard(),
      });
      await wal.append(key(1)).durable;
      await fillUp(`${mnt}/filler`);
      // Larger than what the file's last page has left: it needs new pages.
      const big = publishRecord({ nextSeq: () => 2 }, "m2", "x".repeat(64 * 1024));
      let durable = false;
      const waiting = wal.append(big).durable.then(() => durable = true);
      await noSpace;
      assertEquals([wal.failed, durable], [undefined, false], "waiting, not failed");
      const e = await wal.barrier().then(() => undefined, (e) => e);
      assert(/os error 28/.test(String(e)), `barrier() does not wait through it: ${e}`);
      await Deno.remove(`${mnt}/filler`);
      await waiting;
      await wal.append(key(3)).durable;
      await wal.close();
      const { seen, result } = await replayAll(path);
      assertEquals(seen, [1, 2, 3]);
      assertEquals(result.cut, undefined, "no torn write was left in the file");
    } finally {
      await unmountTmpfs(mnt!);
    }
  },
});
