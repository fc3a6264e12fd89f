/**
 * Helpers the lib twins share: a broker on a hand-driven clock, a real Topic over a MemoryWal,
 * publish records with defaults, and payload bytes. Time only moves when a test moves it.
 */

import { Broker } from "../../lib/broker.ts";
import { type Config, defaultConfig } from "../../lib/config.ts";
import { MemoryBudget } from "../../lib/memory/budget.ts";
import { NORMAL } from "../../lib/message.ts";
import { Topic, type TopicSettings } from "../../lib/topic.ts";
import { MemoryWal } from "../../lib/storage/memory_wal.ts";
import type { Wal } from "../../lib/storage/wal.ts";
import { type PublishRecord, RecordType } from "../../lib/storage/record.ts";

/** A fixed start time, so ids and timestamps do not depend on the wall clock. */
export const T0 = 1_700_000_000_000;

export const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
export const text = (p: Uint8Array): string => new TextDecoder().decode(p);

/** A broker whose time is `now`, moved only by `set`/`advance` (which sweep). */
export interface Clocked {
  broker: Broker;
  /** The data dir (":memory:" unless one was asked for). */
  dir: string;
  readonly now: number;
  /** Sets the clock without sweeping. */
  set(t: number): void;
  /** Moves the clock by `ms` and sweeps at the new time. */
  advance(ms: number): void;
  /** Closes the broker and removes a temp dir this helper made. */
  close(): Promise<void>;
}

/**
 * Opens a broker on a hand-driven clock, with no sweep timer. `dataDir: "temp"` makes a temp
 * dir (removed by close()); the default is ":memory:".
 */
export async function openBroker(
  overrides: Partial<Config> = {},
  start = T0,
): Promise<Clocked> {
  const made = overrides.dataDir === "temp";
  const dir = made ? await Deno.makeTempDir({ prefix: "ferry-twin-" }) : overrides.dataDir ??
    ":memory:";
  let now = start;
  const broker = await Broker.open(defaultConfig({ ...overrides, dataDir: dir }), {
    clock: () => now,
    tick: false,
  });
  return {
    broker,
    dir,
    get now() {
      return now;
    },
    set(t) {
      now = t;
    },
    advance(ms) {
      now += ms;
      broker.sweep(now);
    },
    async close() {
      await broker.close();
      if (made) await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A real Topic over a MemoryWal (or the given WAL), created at `createdAt`. */
export function memTopic(
  name = "t",
  settings: Partial<TopicSettings> = {},
  memory: MemoryBudget = new MemoryBudget(Infinity),
  wal: Wal = new MemoryWal(),
): Topic {
  return new Topic(
    name,
    {
      policy: "reject",
      retainMs: 0,
      visibilityMs: 0,
      maxMessages: 0,
      maxBytes: 0,
      createdAt: T0,
      ...settings,
    },
    wal,
    memory,
  );
}

/** A PUBLISH record for `topic` (next seq) with defaults: normal priority, every group, now. */
export function publishRecord(
  topic: Pick<Topic, "nextSeq">,
  id: string,
  payload: string | Uint8Array,
  fields: Partial<PublishRecord> = {},
): PublishRecord {
  return {
    type: RecordType.Publish,
    seq: topic.nextSeq(),
    id,
    timestamp: T0,
    priority: NORMAL,
    merge: false,
    expiresAt: 0,
    redriveCount: 0,
    idemKey: undefined,
    reason: undefined,
    origin: undefined,
    headers: undefined,
    deliveries: undefined,
    dueAt: 0,
    payload: typeof payload === "string" ? bytes(payload) : payload,
    ...fields,
  };
}

/** Commits a PUBLISH of `payload` as message `id` to `topic` at `now`. */
export function put(
  topic: Topic,
  id: string,
  payload: string | Uint8Array,
  now = T0,
  fields: Partial<PublishRecord> = {},
): Promise<void> {
  return topic.commit(publishRecord(topic, id, payload, { timestamp: now, ...fields }), now);
}

/** The text of each message's payload, in order. */
export function texts(items: Iterable<{ msg: { readPayload(): Uint8Array } }>): string[] {
  return [...items].map((d) => text(d.msg.readPayload()));
}

/**
 * Moves the clock so the broker starts compacting `topic`, and publishes through it: ten
 * publishes before the snapshot starts, then one a turn while it is written (captured, moved
 * after it), until the file is swapped and the relocation after the swap has run. Returns how
 * many publishes raced the compaction.
 */
export async function publishThroughCompaction(
  t: Pick<Clocked, "advance">,
  topic: Topic,
  publish: (n: number) => Promise<unknown>,
  first: number,
): Promise<number> {
  const generation = topic.wal.generation;
  t.advance(10); // starts a compaction in the background
  const racing = Array.from({ length: 10 }, (_, i) => publish(first + i));
  for (let i = 10; topic.wal.generation === generation; i++) {
    racing.push(publish(first + i));
    await new Promise((r) => setTimeout(r, 0));
  }
  await Promise.all(racing);
  await new Promise((r) => setTimeout(r, 1)); // the relocation follows the swap
  return racing.length;
}
