/**
 * @module Section `restart` (row 12): rounds of crash-loop churn on 4 topics, each ended by
 * SIGKILL mid-traffic, then spawn → listening of the restart, of a second one 2 s later, and of
 * a broker on an empty data dir.
 */

import { removeDir, tempDir } from "../harness/cleanup.ts";
import { busyNote, quiet } from "../harness/cpu.ts";
import { int, log } from "../harness/format.ts";
import { MIB, type Options, type Plan, POLL_MS, sleep } from "../harness/plan.ts";
import { dirBytes, zeroTailBytes } from "../harness/probes.ts";
import { type Server, startBroker } from "../harness/spawn.ts";
import { row, verdict } from "../report.ts";

const CHURN_TOPICS = ["churn-a", "churn-b", "churn-c", "churn-d"];

/**
 * Crash-loop traffic on CHURN_TOPICS until `count` publishes were answered, then SIGKILL with
 * requests in flight: 16 publishers of small payloads; 8 consumers taking up to 10 (a 5-minute
 * lease), acking about 45 % one by one and 45 % in a batch, leaving the rest leased. First it
 * takes what the last round left with auto_ack, as the crash loop's drains do.
 */
async function churnRound(b: Server, count: number, round: number): Promise<number> {
  for (const topic of CHURN_TOPICS) {
    while (true) {
      const res = await fetch(`${b.url}/consume/${topic}?limit=1000&auto_ack=true`);
      await res.body?.cancel();
      if (res.status !== 200) break;
    }
  }
  let published = 0;
  const done = () => published >= count;
  const post = (path: string, body: string) =>
    fetch(`${b.url}${path}`, { method: "POST", body }).then((r) => r.text());
  const publisher = async (w: number) => {
    const topic = CHURN_TOPICS[w % CHURN_TOPICS.length]!;
    for (let n = 0; !done(); n++) {
      await post(`/publish/${topic}`, `r${round}-p${w}-${n}`);
      published++;
    }
  };
  const consumer = async (c: number) => {
    for (let i = 0; !done(); i++) {
      const topic = CHURN_TOPICS[(c + i) % CHURN_TOPICS.length]!;
      const limit = 1 + (i * 7 + c) % 10;
      const res = await fetch(
        `${b.url}/consume/${topic}?limit=${limit}&timeout=100ms&visibility=5m`,
      );
      if (res.status !== 200) {
        await res.body?.cancel();
        continue;
      }
      const body = await res.json() as { id: string } | { id: string }[];
      const batch: string[] = [];
      for (const [k, m] of (Array.isArray(body) ? body : [body]).entries()) {
        const r = (k * 37 + i * 11 + c) % 100;
        if (r < 45) await post(`/ack/${topic}/${m.id}`, "");
        else if (r < 90) batch.push(m.id);
      }
      if (batch.length) await post(`/ack/${topic}`, JSON.stringify({ ids: batch }));
    }
  };
  const t0 = performance.now();
  const traffic = Promise.all([
    ...Array.from({ length: 16 }, (_, w) => publisher(w)),
    ...Array.from({ length: 8 }, (_, c) => consumer(c)),
  ]).catch(() => {}); // requests cut by the kill
  while (!done()) await sleep(POLL_MS);
  await b.stop("SIGKILL");
  await traffic;
  return published / ((performance.now() - t0) / 1000);
}

/** Churn rounds ended by SIGKILL, then the restart times. */
export async function restart(o: Options, _p: Plan): Promise<void> {
  const rounds = o.quick ? 3 : 10, perRound = o.quick ? 4_000 : 6_000;
  const floorDir = await tempDir("ferry-bench-restart-empty-");
  const dir = await tempDir("ferry-bench-restart-");
  try {
    // The floor: spawn → listening of a broker with nothing to replay.
    const empty = await startBroker(o, floorDir, 100_000);
    await empty.stop("SIGKILL");
    const rates: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      const b = await startBroker(o, dir, 1_000_000);
      rates.push(await churnRound(b, perRound, r));
    }
    const walBytes = await dirBytes(dir);
    const zeroBytes = await zeroTailBytes(dir);
    log(
      `restart: ${rounds} rounds of ${int(perRound)} publishes (${int(Math.min(...rates))}-${
        int(Math.max(...rates))
      } msg/s), WAL ${(walBytes / MIB).toFixed(2)} MiB; restarting`,
    );
    await quiet();
    const first = await startBroker(o, dir, 1_000_000);
    const rec = first.records.find((x) => x.msg === "recovered") ?? {};
    await sleep(2_000); // what start-up does after listening (compaction) has a moment
    await first.stop("SIGKILL");
    const settledBytes = await dirBytes(dir);
    const second = await startBroker(o, dir, 1_000_000);
    await second.stop("SIGKILL");
    const floor = await startBroker(o, floorDir, 100_000);
    await floor.stop("SIGKILL");
    log(
      `restart: spawn → listening ${int(first.listenMs)} ms, again ${
        int(second.listenMs)
      } ms; empty ${int(floor.listenMs)} ms`,
    );
    row({
      section: "12",
      measure: `restart after ${rounds} SIGKILLed rounds of churn on 4 topics, spawn → listening`,
      result: `${int(first.listenMs)} ms`,
      notes: [
        `replayed ${int(Number(rec.records ?? 0))} records (${
          int(Number(rec.messages ?? 0))
        } messages) from ${(walBytes / MIB).toFixed(2)} MiB${
          zeroBytes ? ` (${(zeroBytes / MIB).toFixed(2)} MiB of it zero-filled WAL tails)` : ""
        } in ${rec.duration_ms} ms`,
        `restarted again 2 s later: ${int(second.listenMs)} ms from ${
          (settledBytes / MIB).toFixed(2)
        } MiB`,
        `empty data dir: ${int(floor.listenMs)} ms`,
        `${int(rounds * perRound)} publishes at ${int(Math.min(...rates))}-${
          int(Math.max(...rates))
        } msg/s`,
        await busyNote(),
      ].filter(Boolean).join("; "),
      target: "≤ 150 ms",
      status: verdict(first.listenMs <= 150),
    });
  } finally {
    await removeDir(dir);
    await removeDir(floorDir);
  }
}
