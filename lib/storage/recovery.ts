/**
 * @module Start-up: scanning the data dir, replaying each `<topic>.wal` into a fresh Topic
 * through `Topic.apply` (the path live writes take), and normalising a record for memory
 * (payload copied into a slab or left on disk, headers shared), which a follower applying
 * shipped records needs as much as replay does.
 */

import type { Logger } from "../log.ts";
import type { MemoryBudget } from "../memory/budget.ts";
import { internHeaders, type PayloadLocation } from "../message.ts";
import { checkName } from "../names.ts";
import { PayloadFile } from "../memory/payload_file.ts";
import { copyPayload } from "../memory/slab.ts";
import { Topic, topicSettings } from "../topic.ts";
import { MemoryWal } from "./memory_wal.ts";
import type { Wal } from "./wal.ts";
import { RecordType, type WalRecord } from "./record.ts";
import { replayFile } from "./replay.ts";
import { makeDataDirSync } from "./data_dir_modes.ts";

/** What start-up replay found, for the start-up log line. */
export interface RecoveryReport {
  topics: number;
  messages: number;
  records: number;
  duration_ms: number;
  held_bytes: number;
}

/** What recovery needs from the broker. */
export interface RecoveryOptions {
  dataDir: string;
  now: number;
  log: Logger;
  memory: MemoryBudget;
  /** Payloads this large or larger stay in the file. */
  diskPayloadMin: number;
  /** Opens the writer of a replayed topic's file, `size` its valid length. */
  openWal(name: string, size: number, replayed: PayloadFile): Wal;
  /** Whether this broker replays `name` (with several workers, each replays its own topics). */
  owns?: (name: string) => boolean;
}

/**
 * Readies a decoded record for memory: a PUBLISH's payload is copied out of the read buffer into
 * a slab (or, when at least `diskPayloadMin`, left where `frameEnd` says it is in `file`), and
 * its headers are shared. Returns where the payload stays on disk, if it does.
 */
export function normalise(
  r: WalRecord,
  diskPayloadMin: number,
  file?: PayloadFile,
  frameEnd = 0,
): PayloadLocation | undefined {
  if (r.type !== RecordType.Publish) return undefined;
  r.headers = internHeaders(r.headers);
  if (file && r.payload.length >= diskPayloadMin) {
    return { file, offset: frameEnd - r.payload.length };
  }
  r.payload = copyPayload(r.payload);
  return undefined;
}

/**
 * The names of the data dir's WAL files of topics this broker `owns`, sorted; removes their
 * leftovers of interrupted rewrites (another worker's are its own to remove). Synchronous, like
 * replay's reads (see lib/storage/replay.ts): nothing else runs before listening.
 */
function scan(dir: string, log: Logger, owns: (name: string) => boolean): string[] {
  makeDataDirSync(dir);
  const names: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    if (!e.isFile) continue;
    const leftover = /\.wal\.(compact|salvage)$/.exec(e.name);
    if (leftover) {
      // An interrupted compaction or salvage: the .wal it was to replace is intact.
      if (owns(e.name.slice(0, leftover.index))) Deno.removeSync(`${dir}/${e.name}`);
      continue;
    }
    if (!e.name.endsWith(".wal")) continue;
    const name = e.name.slice(0, -4);
    if (!owns(name)) continue;
    try {
      checkName(name, "topic");
    } catch {
      log.warn("ignoring a WAL file with an invalid topic name", { file: e.name });
      continue;
    }
    names.push(name);
  }
  return names.sort();
}

/** Replays every `<topic>.wal` in the data dir into topics. */
export async function recover(
  o: RecoveryOptions,
): Promise<{ topics: Topic[]; report: RecoveryReport }> {
  const t0 = performance.now();
  const names = scan(o.dataDir, o.log, o.owns ?? (() => true));
  const topics: Topic[] = [];
  let records = 0, messages = 0;
  for (const name of names) {
    // The META record sets the real settings; the WAL is opened once replay knows the size.
    const settings = topicSettings({}, o.now);
    const topic = new Topic(name, settings, new MemoryWal(), o.memory, o.diskPayloadMin);
    const path = `${o.dataDir}/${name}.wal`;
    // Large payloads stay in the file; this reader keeps reading them, even if replay cuts
    // damage out of the file (it reads the file as replay saw it) until a compaction moves them.
    const replayed = PayloadFile.open(path);
    const cache = o.memory.cache;
    const result = await replayFile(path, (r, size, at) => {
      // With a bounded payload cache every payload's place is kept; the first (oldest: the
      // next to be consumed) small ones also stay in memory while the cache has room.
      const disk = normalise(r, cache.bounded ? 0 : topic.diskPayloadMin, replayed, at + size);
      const keep = disk !== undefined && r.type === RecordType.Publish &&
        r.payload.length < topic.diskPayloadMin && cache.bytes + r.payload.length <= cache.budget;
      if (keep) r.payload = copyPayload(r.payload);
      topic.apply(r, o.now, size, disk, keep);
    }, o.log);
    records += result.records;
    if (result.validBytes === 0) {
      // Empty or header-less: start the file afresh.
      await Deno.remove(path);
    }
    topic.wal = o.openWal(name, result.validBytes, replayed);
    topic.durableSeq = topic.seq; // everything replayed is on disk

    messages += topic.messages.size;
    topics.push(topic);
  }
  const report = {
    topics: names.length,
    messages,
    records,
    duration_ms: Math.round((performance.now() - t0) * 10) / 10,
    held_bytes: o.memory.held,
  };
  if (o.memory.held > o.memory.budget) {
    o.log.warn("the log holds more than BROKER_MAX_MEMORY; publishes get 429 until drained", {
      held_bytes: o.memory.held,
      budget_bytes: o.memory.budget,
    });
  }
  return { topics, report };
}
