/**
 * ZeroFill on its own, with time as an argument: which windows of commits earn the fill (the
 * FileWal tests see only the small, frequent case and the large one), and a fill that fails.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { Logger, silentLogger } from "../../../lib/log.ts";
import { ZeroFill } from "../../../lib/storage/zero_fill.ts";

const KIB = 1024;

/** Counts `n` commits of `bytes` each, `gapMs` apart from `start`; returns the time after. */
function commits(z: ZeroFill, n: number, bytes: number, gapMs: number, start = 0): number {
  let now = start;
  for (let i = 0; i < n; i++, now += gapMs) z.countCommit(bytes, now);
  return now;
}

Deno.test("ZeroFill: 64 small commits within a second earn the fill; large ones do not", () => {
  const small = new ZeroFill("t.wal", silentLogger);
  commits(small, 63, KIB, 1);
  assert(!small.due(0), "the window is not closed yet");
  commits(small, 1, KIB, 1, 63);
  assert(small.due(0), "small, frequent commits");

  const large = new ZeroFill("t.wal", silentLogger);
  commits(large, 64, 16 * KIB, 1);
  assert(!large.due(0), "commits averaging more than 8 KiB pay for their metadata themselves");
});

Deno.test("ZeroFill: a window that outlasts a second closes as not frequent, and ends the fill", () => {
  const z = new ZeroFill("t.wal", silentLogger);
  const now = commits(z, 64, KIB, 1);
  assert(z.due(0));
  commits(z, 12, KIB, 100, now); // the 12th commit comes 1.1 s after the window opened
  assert(!z.due(0), "slow commits do not earn the fill");
});

Deno.test("ZeroFill.due() waits until less than 256 KiB of zeros is left ahead", () => {
  const z = new ZeroFill("t.wal", silentLogger);
  commits(z, 64, KIB, 1);
  z.reset(4096);
  z.end = 4096 + 1024 * KIB;
  assert(!z.due(4096 + 512 * KIB));
  assert(z.due(4096 + 800 * KIB));
});

Deno.test("ZeroFill.fill() writes 1 MiB of zeros past the log and puts the position back", async () => {
  const path = await Deno.makeTempFile();
  const file = await Deno.open(path, { read: true, write: true });
  try {
    await file.write(new Uint8Array(100).fill(7));
    const z = new ZeroFill(path, silentLogger);
    z.reset(100);
    await z.fill(file, 100);
    assertEquals(z.end, 100 + 1024 * KIB);
    assertEquals(
      await file.seek(0, Deno.SeekMode.Current),
      100,
      "the next write goes at the log's end",
    );
    const bytes = await Deno.readFile(path);
    assertEquals(bytes.length, 100 + 1024 * KIB);
    assert(bytes.subarray(100).every((b) => b === 0));
    // The next fill starts where the zeros end, not at the log's end.
    await z.fill(file, 200);
    assertEquals(z.end, 100 + 2048 * KIB);
    assertEquals(await file.seek(0, Deno.SeekMode.Current), 200);
  } finally {
    file.close();
    await Deno.remove(path);
  }
});

Deno.test("ZeroFill.fill() that fails warns once, and no window earns the fill again", async () => {
  const path = await Deno.makeTempFile();
  const file = await Deno.open(path, { read: true }); // writes fail
  const lines: string[] = [];
  try {
    const z = new ZeroFill(path, new Logger("warn", (line) => lines.push(line)));
    const now = commits(z, 64, KIB, 1);
    assert(z.due(0));
    await z.fill(file, 0);
    assertEquals(z.end, 0, "nothing filled");
    assert(!z.due(0), "the writer appends plainly");
    assertEquals(lines.length, 1);
    assertEquals(JSON.parse(lines[0]!).msg, "WAL zero-fill failed; appending without it");
    commits(z, 64, KIB, 1, now);
    assert(!z.due(0), "still plain after another small, frequent window");
  } finally {
    file.close();
    await Deno.remove(path);
  }
});
