/**
 * @module Section `replay` (rows 6): start-up replay of a WAL of all publishes, all held, and of
 * one of half publishes, half acks; records/s from the broker's "recovered" line, beside the
 * floor of reading and decoding the same files (tests/bench/replay_floor.ts).
 */

import { removeDir, tempDir } from "../harness/cleanup.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log } from "../harness/format.ts";
import { MIB, type Options, type Plan } from "../harness/plan.ts";
import { dirBytes, fill, topicStats } from "../harness/probes.ts";
import { BROKER_RUNTIME_ENV, BROKER_RUNTIME_FLAGS, startBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

/** The all-held and the steady-state WAL, each replayed by a restarted broker. */
export async function replay(o: Options, p: Plan): Promise<void> {
  // Worst case: every record is a publish and every message is still held after the restart.
  const held = await tempDir("ferry-bench-replay-");
  const maxQueue = Math.max(2_000_000, p.replayCount * 2);
  try {
    // The WAL's bytes do not depend on the fsync mode; writing it unsynced saves most of a minute.
    const first = await startBroker(o, held, maxQueue, "never");
    let fillMs: number;
    try {
      fillMs = await fill(first.url, "replay", p.replayCount, 64);
    } finally {
      await first.stop("SIGTERM");
    }
    log(`replay: wrote ${int(p.replayCount)} records in ${int(fillMs)} ms, restarting`);
    await replayRow(o, held, maxQueue, {
      measure: `start-up replay, ${int(p.replayCount)} × 64 B publishes, all held, records/s`,
      expectHeld: p.replayCount,
    });
  } finally {
    await removeDir(held);
  }
  // Steady state: each message published, consumed and acked, so the WAL is half publishes and
  // half acks and little is held. Written in-process through the broker's own WAL writer.
  const steady = await tempDir("ferry-bench-replay-steady-");
  try {
    const pairs = Math.floor(p.replayCount / 2);
    const t0 = performance.now();
    await writeSteadyWal(steady, pairs);
    log(`replay: wrote ${int(pairs * 2)} records in ${int(performance.now() - t0)} ms, restarting`);
    await replayRow(o, steady, maxQueue, {
      measure: `start-up replay, ${int(pairs)} publishes + ${int(pairs)} acks, records/s`,
      expectHeld: 0,
    });
  } finally {
    await removeDir(steady);
  }
}

/** Publishes `pairs` 64 B messages and acks each with its own ACK record. */
async function writeSteadyWal(dir: string, pairs: number): Promise<void> {
  const { Broker } = await import("../../../lib/broker.ts");
  const { defaultConfig } = await import("../../../lib/config.ts");
  const broker = await Broker.open(
    defaultConfig({ dataDir: dir, fsync: "never", maxQueue: 1e9, compactMinBytes: 2 ** 40 }),
    { tick: false },
  );
  const payload = new Uint8Array(64).fill(0x61);
  const BATCH = 1000;
  for (let done = 0; done < pairs; done += BATCH) {
    const n = Math.min(BATCH, pairs - done);
    await Promise.all(Array.from({ length: n }, () => broker.publish("replay", payload)));
    const taken = await broker.consume("replay", { limit: n });
    await Promise.all(taken.map((m) => broker.ack("replay", "", [m.msg.id])));
  }
  await broker.close();
}

/**
 * Restarts a broker on `dir` and reports its "recovered" line as a replay row, beside the floor
 * of replaying the same files with nothing applied.
 */
async function replayRow(
  o: Options,
  dir: string,
  maxQueue: number,
  r: { measure: string; expectHeld: number },
): Promise<void> {
  const walBytes = await dirBytes(dir);
  // The floor reads the files before the broker does: once started, the broker may compact a
  // log it finds all dead (the steady one) down to a few records.
  const floor = await replayFloorNote(dir);
  await quiet();
  const second = await startBroker(o, dir, maxQueue);
  let records: number, durationMs: number, messages: number, held: number, busy: string;
  try {
    const rec = second.records.find((x) => x.msg === "recovered");
    if (!rec) throw new Error('no "recovered" log line');
    records = Number(rec.records);
    durationMs = Number(rec.duration_ms);
    messages = Number(rec.messages);
    if (!(records > 0 && durationMs > 0)) {
      throw new Error(`odd "recovered" line ${JSON.stringify(rec)}`);
    }
    held = (await topicStats(second.url, "replay")).depth;
    busy = await busyNote();
  } finally {
    await second.stop("SIGKILL");
  }
  const rate = records / (durationMs / 1000);
  log(`replay: ${int(records)} records in ${durationMs} ms = ${int(rate)} records/s`);
  row({
    section: "6",
    measure: r.measure,
    result: int(rate),
    notes: [
      `${int(records)} records, ${int(messages)} messages in ${durationMs.toFixed(0)} ms`,
      `spawn → listening ${int(second.listenMs)} ms`,
      `WAL ${(walBytes / MIB).toFixed(1)} MiB (written with --fsync never)`,
      held !== r.expectHeld ? `holds ${int(held)} after restart` : "",
      busy,
      floor.records === records ? "" : `the floor read ${int(floor.records)} records`,
      floor.note,
    ].filter(Boolean).join("; "),
    target: "≥ 1,000,000 records/s",
    status: held === r.expectHeld ? verdict(rate >= 1_000_000) : "FAIL",
  });
}

/**
 * What replaying `dir` costs with nothing applied (tests/bench/replay_floor.ts, with the broker's
 * runtime flags): the floor of the WAL format and its decoder under any message store.
 */
async function replayFloorNote(dir: string): Promise<{ records: number; note: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      ...BROKER_RUNTIME_FLAGS,
      new URL("../replay_floor.ts", import.meta.url).pathname,
      dir,
    ],
    env: BROKER_RUNTIME_ENV,
    stdin: "null",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`replay_floor.ts exited with ${out.code}`);
  const f = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    records: number;
    checked_ms: number;
    decoded_ms: number;
  };
  const rate = (ms: number) => int(f.records / (ms / 1000));
  return {
    records: f.records,
    note: `with nothing applied, the floor of this WAL format here: reading and checking ${
      rate(f.checked_ms)
    } records/s, and decoding them too (replayFile) ${rate(f.decoded_ms)}`,
  };
}
