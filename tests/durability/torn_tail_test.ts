/**
 * A WAL file damaged at its tail after a SIGKILL (torn record, garbage, bad checksum) still
 * starts: the broker warns, cuts the tail, keeps every record before it, and appends new
 * records where the cut was so they survive the next restart. Zeros at the end are the
 * writer's zero-filled stretch: cut the same way, without a warning. A file of an unknown
 * format version stops start-up instead of being cut or skipped.
 */

import {
  assert,
  assertEquals,
  assertMatch,
  assertNotEquals,
  assertNotMatch,
} from "../_support/assert.ts";
import {
  decodeRecord,
  FILE_HEADER_BYTES,
  FRAME_HEADER_BYTES,
  RecordType,
} from "../../lib/storage/record.ts";
import {
  type ChildBroker,
  logLines,
  runMain,
  start,
  stop,
  withDataDir,
} from "../_support/child.ts";
import { fileSize, walPath } from "../_support/files.ts";
import { consumeList, textOf, tryPublish } from "../_support/http.ts";

const TOPIC = "torn";

interface Frame {
  offset: number;
  /** Frame bytes, header included. */
  size: number;
  type: RecordType;
}

/** Walks the frames of an intact WAL file, up to the writer's zero-filled stretch if any. */
function frames(bytes: Uint8Array): Frame[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Frame[] = [];
  let pos = FILE_HEADER_BYTES;
  while (pos < bytes.length) {
    const len = view.getUint32(pos, true);
    if (len === 0 && bytes.subarray(pos).every((b) => b === 0)) break;
    const body = bytes.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + len);
    assertEquals(body.length, len, `frame at ${pos} runs past the end of the file`);
    out.push({ offset: pos, size: FRAME_HEADER_BYTES + len, type: decodeRecord(body).type });
    pos += FRAME_HEADER_BYTES + len;
  }
  return out;
}

/** Payloads the default group would take next, in order, without taking them. */
async function held(child: ChildBroker): Promise<string[]> {
  return (await consumeList(child.url, TOPIC, "peek=true&limit=1000")).map(textOf);
}

async function publishAll(child: ChildBroker, payloads: string[]): Promise<void> {
  for (const p of payloads) {
    const r = await tryPublish(child.url, TOPIC, p);
    assertEquals(r.status, 201, `${p}: ${JSON.stringify(r.body)}`);
  }
}

function cutWarnings(child: ChildBroker) {
  return logLines(child).filter((l) => l.level === "warn" && /cut/i.test(String(l.msg)));
}

interface Damage {
  name: string;
  /** Returns the damaged file; `last` is the final frame (a PUBLISH of `torn-29`). */
  damage(bytes: Uint8Array, last: Frame): Uint8Array;
  /** Whether the last record is gone after the cut. */
  losesLast: boolean;
  /** Cut without a warning or a kept copy: what a running writer leaves. */
  silent?: boolean;
}

const concat = (a: Uint8Array, b: Uint8Array) => {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
};

const DAMAGES: Damage[] = [
  {
    name: "truncated in the middle of the last record",
    damage: (b, last) => b.slice(0, last.offset + Math.floor(last.size / 2)),
    losesLast: true,
  },
  {
    name: "truncated inside the last record's frame header",
    damage: (b, last) => b.slice(0, last.offset + 5),
    losesLast: true,
  },
  {
    name: "garbage bytes appended",
    damage: (b) => concat(b, Uint8Array.from({ length: 37 }, (_, i) => (i * 97 + 13) & 0xff)),
    losesLast: false,
  },
  {
    name: "a zero-filled stretch appended (the writer's, never written over)",
    damage: (b) => concat(b, new Uint8Array(4096)),
    losesLast: false,
    silent: true,
  },
  {
    name: "torn in the last record, zeros after it (a torn write into the zero-filled stretch)",
    damage: (b, last) =>
      concat(b.slice(0, last.offset + Math.floor(last.size / 2)), new Uint8Array(4096)),
    losesLast: true,
  },
  {
    name: "a frame header promising 1 MiB appended with nothing after it",
    damage: (b) => {
      const h = new Uint8Array(FRAME_HEADER_BYTES);
      new DataView(h.buffer).setUint32(0, 1 << 20, true);
      return concat(b, h);
    },
    losesLast: false,
  },
  {
    name: "one byte flipped in the last record's payload (checksum mismatch)",
    damage: (b, last) => {
      const out = b.slice();
      out[last.offset + last.size - 1]! ^= 0x20;
      return out;
    },
    losesLast: true,
  },
];

for (const d of DAMAGES) {
  Deno.test({
    name: `WAL tail ${d.name}: start-up cuts it, keeps what precedes, appends after the cut`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () =>
      withDataDir(async (dir) => {
        const path = walPath(dir, TOPIC);
        let child = await start(dir);
        // 25 publishes, 5 of them acked (an ACK record), then 5 more: the last record is a PUBLISH.
        await publishAll(child, Array.from({ length: 25 }, (_, i) => `torn-${i}`));
        const acked = await consumeList(child.url, TOPIC, "limit=5&auto_ack=true");
        assertEquals(acked.map(textOf), ["torn-0", "torn-1", "torn-2", "torn-3", "torn-4"]);
        await publishAll(child, Array.from({ length: 5 }, (_, i) => `torn-${25 + i}`));
        await stop(child, "SIGKILL");

        const intact = await Deno.readFile(path);
        const all = frames(intact);
        const last = all[all.length - 1]!;
        assertEquals(last.type, RecordType.Publish);
        assert(all.some((f) => f.type === RecordType.Ack), "an ACK record precedes the tail");
        const damaged = d.damage(intact, last);
        await Deno.writeFile(path, damaged);

        const expected = Array.from({ length: 25 }, (_, i) => `torn-${5 + i}`);
        if (d.losesLast) expected.pop();
        const validBytes = d.losesLast ? last.offset : intact.length;

        child = await start(dir);
        const warns = cutWarnings(child);
        assertEquals(
          warns.length,
          d.silent ? 0 : 1,
          `${d.silent ? "no" : "one"} warn line about the cut:\n${child.logs.join("\n")}`,
        );
        if (!d.silent) {
          assertEquals(warns[0]!.path, path);
          assertEquals(warns[0]!.valid_bytes, validBytes);
          assertEquals(warns[0]!.cut_bytes, damaged.length - validBytes);
          const kept = await Deno.readFile(String(warns[0]!.kept_in));
          assertEquals(kept, damaged.slice(validBytes), "the cut bytes are kept");
        }
        const cutFiles = (await Array.fromAsync(Deno.readDir(dir))).filter((e) =>
          e.name.includes(".cut-")
        );
        assertEquals(cutFiles.length, d.silent ? 0 : 1, "a kept copy only of damage");
        assertEquals(
          await fileSize(path),
          validBytes,
          "the file is cut back to its valid part",
        );
        assertEquals(await held(child), expected);

        // New records go where the cut was, and survive a crash and restart.
        const more = ["after-0", "after-1", "after-2"];
        await publishAll(child, more);
        await stop(child, "SIGKILL");
        child = await start(dir);
        assertEquals(cutWarnings(child), [], "nothing left to cut on the next start");
        assertEquals(await held(child), [...expected, ...more]);
        assertEquals(
          frames(await Deno.readFile(path)).length,
          all.length - (d.losesLast ? 1 : 0) + more.length,
          "the file holds exactly the surviving and the new records",
        );
        await stop(child, "SIGTERM");
      }),
  });
}

Deno.test({
  name: "a WAL file torn inside its 16-byte header starts afresh with a warning",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const path = walPath(dir, TOPIC);
      let child = await start(dir);
      await publishAll(child, ["x"]);
      await stop(child, "SIGKILL");
      await Deno.writeFile(path, (await Deno.readFile(path)).slice(0, 10));

      child = await start(dir);
      const firstLogs = child.logs.slice();
      assertEquals(await held(child), []);
      await publishAll(child, ["y"]);
      await stop(child, "SIGKILL");
      child = await start(dir);
      assertEquals(await held(child), ["y"]);
      await stop(child, "SIGTERM");
      // Bytes were thrown away: say so, as every other cut does (wal.ts: "cuts ... logging it").
      const warned = firstLogs.filter((l) => /"level":"warn"/.test(l) && /cut/i.test(l));
      assertEquals(
        warned.length,
        1,
        `a warn line about the cut:\n${firstLogs.join("\n")}`,
      );
    }),
});

Deno.test({
  name: "a WAL file of an unknown format version stops start-up, naming the file, losing nothing",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let child = await start(dir);
      for (const t of ["fine", "future"]) {
        for (let i = 0; i < 3; i++) {
          assertEquals((await tryPublish(child.url, t, `${t}-${i}`)).status, 201);
        }
      }
      assertEquals((await stop(child, "SIGTERM")).code, 0);

      const future = walPath(dir, "future");
      const original = await Deno.readFile(future);
      const bumped = original.slice();
      new DataView(bumped.buffer).setUint16(8, 2, true); // file version 1 → 2
      await Deno.writeFile(future, bumped);
      const fineBefore = await Deno.readFile(walPath(dir, "fine"));

      const { code, stderr } = await runMain({ dataDir: dir, args: ["--port", "0"] });
      assertNotEquals(code, 0, `start-up must fail:\n${stderr}`);
      assertNotMatch(stderr, /"msg":"listening"/);
      assertNotMatch(stderr, /^\s+at /m, "no stack trace");
      // One plain line for a human (plus the structured log line of the same error).
      const plain = stderr.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("{"));
      assertEquals(plain.length, 1, `one plain error line:\n${stderr}`);
      assertMatch(plain[0]!, /future\.wal/);
      assertMatch(plain[0]!, /version 2/);
      // Neither file was cut, rewritten or removed.
      assertEquals(await Deno.readFile(future), bumped);
      assertEquals(await Deno.readFile(walPath(dir, "fine")), fineBefore);

      // Put the version back: everything is still there.
      await Deno.writeFile(future, original);
      child = await start(dir);
      for (const t of ["fine", "future"]) {
        const got = (await consumeList(child.url, t, "peek=true&limit=10")).map(textOf);
        assertEquals(got, [`${t}-0`, `${t}-1`, `${t}-2`]);
      }
      await stop(child, "SIGTERM");
    }),
});

Deno.test({
  name: "a file that is not a Ferry WAL stops start-up instead of being cut",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const junk = new TextEncoder().encode("this is not a write-ahead log, keep me\n");
      await Deno.writeFile(walPath(dir, "stranger"), junk);
      const { code, stderr } = await runMain({ dataDir: dir, args: ["--port", "0"] });
      assertNotEquals(code, 0, `start-up must fail:\n${stderr}`);
      assertMatch(stderr, /stranger\.wal/);
      assertNotMatch(stderr, /^\s+at /m, "no stack trace");
      assertEquals(await Deno.readFile(walPath(dir, "stranger")), junk, "file untouched");
    }),
});

for (const size of [0, 10]) {
  Deno.test({
    name: `a WAL file of ${size} bytes (killed as it was created) does not stop a later SIGTERM`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () =>
      withDataDir(async (dir) => {
        let child = await start(dir);
        await publishAll(child, ["kept"]);
        assertEquals((await tryPublish(child.url, "fresh", "x")).status, 201);
        await stop(child, "SIGKILL");
        // A SIGKILL right after `fresh.wal` was created leaves it empty or with half a header.
        const fresh = walPath(dir, "fresh");
        await Deno.writeFile(fresh, (await Deno.readFile(fresh)).slice(0, size));

        child = await start(dir);
        assertEquals(await held(child), ["kept"]);
        const status = await stop(child, "SIGTERM", 5_000);
        assertEquals(
          status.code,
          0,
          `SIGTERM did not end the broker within 5 s (it was SIGKILLed); last lines:\n${
            child.logs.slice(-3).join("\n")
          }`,
        );
        child = await start(dir);
        assertEquals(await held(child), ["kept"]);
        await stop(child, "SIGKILL");
      }),
  });
}

Deno.test({
  name: "one flipped byte mid-WAL: start-up skips that record only and keeps the bytes aside",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const path = walPath(dir, TOPIC);
      let child = await start(dir);
      const payloads = Array.from({ length: 150 }, (_, i) => `mid-${i}`);
      await publishAll(child, payloads);
      await stop(child, "SIGKILL");
      const intact = await Deno.readFile(path);
      const publishes = frames(intact).filter((f) => f.type === RecordType.Publish);
      const bad = publishes[49]!; // mid-49, followed by 100 acknowledged publishes
      const damaged = intact.slice();
      damaged[bad.offset + bad.size - 2]! ^= 0x04;
      await Deno.writeFile(path, damaged);

      child = await start(dir);
      const skippedLines = logLines(child).filter((l) => l.msg === "WAL damage skipped");
      assertEquals(skippedLines.length, 1, child.logs.join("\n"));
      const line = skippedLines[0]!;
      assertEquals([line.offset, line.bytes, line.reason], [
        bad.offset,
        bad.size,
        "checksum mismatch",
      ]);
      assertEquals(await held(child), payloads.filter((p) => p !== "mid-49"));
      const kept = await Deno.readFile(String(line.kept_in));
      assertEquals(kept, damaged.slice(bad.offset, bad.offset + bad.size));
      await publishAll(child, ["after"]);
      await stop(child, "SIGKILL");
      child = await start(dir);
      assertEquals(
        logLines(child).filter((l) => l.level === "warn").length,
        0,
        "clean now",
      );
      assertEquals((await held(child)).length, 150);
      await stop(child, "SIGTERM");
    }),
});

Deno.test({
  name: "a damaged ACK record mid-WAL brings its messages back rather than losing any",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const path = walPath(dir, TOPIC);
      let child = await start(dir);
      await publishAll(child, Array.from({ length: 10 }, (_, i) => `ack-${i}`));
      const taken = await consumeList(child.url, TOPIC, "limit=4&auto_ack=true");
      assertEquals(taken.length, 4);
      await publishAll(child, ["later"]);
      await stop(child, "SIGKILL");
      const intact = await Deno.readFile(path);
      const ack = frames(intact).find((f) => f.type === RecordType.Ack)!;
      const damaged = intact.slice();
      damaged[ack.offset + ack.size - 1]! ^= 0xff;
      await Deno.writeFile(path, damaged);

      child = await start(dir);
      assertEquals(await held(child), [
        ...Array.from({ length: 10 }, (_, i) => `ack-${i}`),
        "later",
      ]);
      await stop(child, "SIGTERM");
    }),
});
