/**
 * The soak campaign: a real broker child (`main.ts` through spawnBroker, with the start task's
 * V8 flags and malloc settings, BROKER_FSYNC=always, a temp data dir) under a steady, paced,
 * mixed HTTP load, sampled for RSS, open fds, depth and rates. Then the load stops, the topics drain, the load's connections close,
 * and `verdict()` judges what was seen: 5xx answers, fd leaks, RSS growth.
 * `tools/soak.ts` runs it for minutes, `tests/ops/soak_test.ts` for seconds.
 */

import { type ChildBroker, spawnBroker } from "../_support/child.ts";
import { startTaskEnv } from "../_support/start_task.ts";
import { HELD_CONNS, IDLE_TOPIC, Load, maxOf, setUp, sleep, type Totals } from "./soak_load.ts";

/** Open fds allowed above the idle baseline once the load has stopped, plus one per new topic. */
export const FD_MARGIN = 4;
/** RSS growth allowed between the load's two halves, as a share of the first half's max. */
export const RSS_GROWTH_SHARE = 0.2;
/** The least RSS growth allowed between the load's two halves, in MiB. */
export const RSS_GROWTH_FLOOR_MIB = 32;
/** RSS allowed on top per payload byte of extra held messages (measured at 2.41; docs/operating.md, "Memory"). */
export const RSS_PER_HELD_BYTE = 3;
const DRAIN_TIMEOUT_MS = 30_000;
const SETTLE_TIMEOUT_MS = 15_000;
const MIB = 1024 * 1024;

/** What to run: the load's length, rate and shape, how often to sample, how long to idle after. */
export interface SoakOptions {
  durationMs: number;
  ratePerSec: number;
  sampleMs: number;
  topics: number;
  payloadBytes: number;
  /** The start of the load that the RSS growth check skips (default: a quarter of the load). */
  warmupMs?: number;
  /** Idle time sampled after the drain, with no connection open (default 0). */
  idleMs?: number;
}

/** One row: when and in which phase, the broker's RSS and fds, topic totals, rates since the last. */
export interface Sample {
  t: number;
  phase: "start" | "load" | "drain" | "idle" | "end";
  rssBytes: number;
  fds: number;
  depth: number;
  inFlight: number;
  held: number;
  publishPerSec: number;
  ackPerSec: number;
}

/** Everything a soak saw, for `verdict()` and the summary. */
export interface SoakReport {
  samples: Sample[];
  rss: { start: number; warm: number; max: number; end: number };
  fds: { start: number; max: number; end: number };
  published: number;
  acked: number;
  requeued: number;
  /** Every answer the load got, by status (404 included: empty consumes answer it). */
  statuses: Record<string, number>;
  /** 5xx answers the broker counted itself (`/metrics`), those to clients that left included. */
  broker5xx: number;
  /** Requests that failed without an answer although nobody had aborted them. */
  transportErrors: number;
  /** The held connections, and how many the broker had closed (or answered) when the load ended. */
  held: { opened: number; closedByBroker: number };
  drained: boolean;
  deadLettered: number;
  /** Topics that appeared during the load (`.dlq`s); each holds a WAL file open. */
  newTopics: number;
  brokerExit?: string;
  /** The RSS maxima of the load's two halves after warm-up and the growth allowed. */
  rssGrowth?: { firstMax: number; secondMax: number; allowed: number };
}

/** Callbacks and cancellation for `runSoak()`. */
export interface SoakHooks {
  onSample?: (s: Sample) => void;
  /** Runs after the last sample, while the broker still runs. */
  beforeKill?: (url: string) => Promise<void>;
  /** Aborting kills the broker at once; runSoak() then rejects. */
  signal?: AbortSignal;
}

/** VmRSS and the open fd count of a process; undefined once it is gone. */
async function procFigures(pid: number): Promise<{ rssBytes: number; fds: number } | undefined> {
  try {
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    let fds = 0;
    for await (const _ of Deno.readDir(`/proc/${pid}/fd`)) fds++;
    return { rssBytes: Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) * 1024, fds };
  } catch {
    return undefined;
  }
}

/** Polls the broker's fd count every 100 ms until `done` holds or `ms` have passed. */
async function fdsWhen(pid: number, done: (fds: number, prev: number) => boolean, ms: number) {
  let prev = -1;
  for (const end = performance.now() + ms; performance.now() <= end; await sleep(100)) {
    const fds = (await procFigures(pid))?.fds ?? -1;
    if (done(fds, prev)) break;
    prev = fds;
  }
}

/** The RSS maxima of the load's two halves after warm-up, and the growth allowed between them. */
function rssGrowth(samples: Sample[], o: SoakOptions, warmupS: number): SoakReport["rssGrowth"] {
  const mid = (warmupS + o.durationMs / 1000) / 2;
  const judged = samples.filter((s) => s.phase === "load" && s.t >= warmupS);
  const [a, b] = [judged.filter((s) => s.t < mid), judged.filter((s) => s.t >= mid)];
  if (!a.length || !b.length) return undefined;
  const extraHeld = Math.max(0, maxOf(b, (s) => s.held) - maxOf(a, (s) => s.held));
  const firstMax = maxOf(a, (s) => s.rssBytes);
  const allowed = Math.max(firstMax * RSS_GROWTH_SHARE, RSS_GROWTH_FLOOR_MIB * MIB) +
    extraHeld * o.payloadBytes * RSS_PER_HELD_BYTE;
  return { firstMax, secondMax: maxOf(b, (s) => s.rssBytes), allowed };
}

/** Samples the broker: /proc for RSS and fds, the load's client for topic totals and 5xx. */
class Sampler {
  readonly samples: Sample[] = [];
  totals: Totals | undefined;
  broker5xx = 0;
  phase: Sample["phase"] = "load";
  readonly #t0 = performance.now();
  readonly #stop = new AbortController();
  #last = { t: 0, published: 0, acked: 0 };
  #loop: Promise<void> = Promise.resolve();

  constructor(readonly pid: number, readonly load: Load, readonly onSample?: (s: Sample) => void) {}

  /** Takes one sample; `http` adds a GET /api/queues and a /metrics scrape (a connection). */
  async take(phase: Sample["phase"], http: boolean): Promise<void> {
    const proc = await procFigures(this.pid);
    if (http) this.totals = await this.load.totals() ?? this.totals;
    if (http) this.broker5xx = await this.load.broker5xx() ?? this.broker5xx;
    if (!proc) return;
    const { published, acked } = this.load;
    const t = (performance.now() - this.#t0) / 1000;
    const dt = Math.max(t - this.#last.t, 1e-3);
    const s: Sample = {
      t,
      phase,
      ...proc,
      depth: this.totals?.depth ?? 0,
      inFlight: this.totals?.inFlight ?? 0,
      held: this.totals?.held ?? 0,
      publishPerSec: (published - this.#last.published) / dt,
      ackPerSec: (acked - this.#last.acked) / dt,
    };
    this.#last = { t, published, acked };
    this.samples.push(s);
    this.onSample?.(s);
  }

  /** Samples every `ms` on a fixed grid, in the current `phase`, until stop(). */
  every(ms: number): void {
    this.#loop = (async () => {
      for (let k = 1; !this.#stop.signal.aborted; k++) {
        await sleep(this.#t0 + k * ms - performance.now(), this.#stop.signal);
        if (!this.#stop.signal.aborted) await this.take(this.phase, true);
      }
    })();
  }

  stop(): Promise<void> {
    this.#stop.abort();
    return this.#loop;
  }
}

/** Spawns the broker, loads and samples it, stops, drains and settles; always kills the broker. */
export async function runSoak(o: SoakOptions, hooks: SoakHooks = {}): Promise<SoakReport> {
  const dir = await Deno.makeTempDir({ prefix: "ferry-soak-" });
  const topics = Array.from({ length: o.topics }, (_, i) => `soak-${i}`);
  let child: ChildBroker | undefined;
  let load: Load | undefined;
  let brokerExit: string | undefined;
  let dying = false;
  const kill = () => {
    dying = true;
    load?.stopLoad.abort();
    load?.stopConsumers.abort();
    child?.kill("SIGKILL");
  };
  hooks.signal?.addEventListener("abort", kill);
  const check = () => hooks.signal?.throwIfAborted();
  try {
    const env = { ...startTaskEnv(), BROKER_FSYNC: "always" }; // as `deno task start` runs it
    child = await spawnBroker({ dataDir: dir, env });
    child.exited.then((s) => {
      if (!dying) brokerExit = `exit code ${s.code}${s.signal ? `, ${s.signal}` : ""}`, kill();
    });
    check();
    const pid = child.process.pid;
    await setUp(child.url, [...topics, IDLE_TOPIC]);
    await fdsWhen(pid, (fds, prev) => fds === prev, 3_000); // the set-up's connection is gone
    load = new Load(child.url, o, topics);
    const sampler = new Sampler(pid, load, hooks.onSample);
    await sampler.take("start", false);
    const base = sampler.samples[0]!;
    await load.holdOpen();
    sampler.every(o.sampleMs);
    const workers = load.run();
    await sleep(o.durationMs, load.stopLoad.signal);
    check();

    sampler.phase = "drain";
    load.stopLoad.abort();
    const closedByBroker = await load.releaseHeld();
    let drained = false;
    for (const end = performance.now() + DRAIN_TIMEOUT_MS; !brokerExit; await sleep(250)) {
      sampler.totals = await load.totals() ?? sampler.totals;
      drained = sampler.totals?.pending === 0;
      if (drained || performance.now() > end) break;
    }
    sampler.broker5xx = await load.broker5xx() ?? sampler.broker5xx;
    load.stopConsumers.abort();
    await Promise.all([workers, sampler.stop()]);
    load.client.close();
    check();

    const { totals, samples } = sampler;
    const newTopics = (totals?.topics ?? 0) - topics.length - 1;
    const fdLimit = base.fds + FD_MARGIN + newTopics;
    await fdsWhen(pid, (fds) => fds <= fdLimit, brokerExit ? 0 : SETTLE_TIMEOUT_MS);
    for (let k = 1; k * o.sampleMs <= (o.idleMs ?? 0) && !brokerExit; k++) {
      await sleep(o.sampleMs, hooks.signal);
      await sampler.take("idle", false);
    }
    await sampler.take("end", false);
    check();
    if (!brokerExit) await hooks.beforeKill?.(child.url);
    const warmupS = (o.warmupMs ?? o.durationMs / 4) / 1000;
    const end = samples.at(-1)!;
    return {
      samples,
      rss: {
        start: base.rssBytes,
        warm: samples.find((s) => s.phase === "load" && s.t >= warmupS)?.rssBytes ?? NaN,
        max: maxOf(samples, (s) => s.rssBytes),
        end: end.rssBytes,
      },
      fds: { start: base.fds, max: maxOf(samples, (s) => s.fds), end: end.fds },
      published: load.published,
      acked: load.acked,
      requeued: load.requeued,
      statuses: load.statuses,
      broker5xx: sampler.broker5xx,
      transportErrors: load.transportErrors,
      held: { opened: HELD_CONNS, closedByBroker },
      drained,
      deadLettered: totals?.deadLettered ?? 0,
      newTopics,
      brokerExit,
      rssGrowth: rssGrowth(samples, o, warmupS),
    };
  } finally {
    hooks.signal?.removeEventListener("abort", kill);
    kill();
    await child?.exited;
    await load?.releaseHeld();
    try {
      load?.client.close();
    } catch { /* closed already */ }
    await child?.ended;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The reasons a soak failed, none when it passed; `maxRssBytes` adds an absolute RSS bound. */
export function verdict(r: SoakReport, limits: { rssGrowth: boolean; maxRssBytes?: number }) {
  const mib = (b: number) => `${(b / MIB).toFixed(1)} MiB`;
  const g = r.rssGrowth;
  const served5xx = Object.entries(r.statuses).filter(([s]) => Number(s) >= 500);
  return [
    r.brokerExit && `the broker died during the soak (${r.brokerExit})`,
    served5xx.length && `5xx answers: ${served5xx.map(([s, n]) => `${s} × ${n}`).join(", ")}`,
    r.broker5xx && `the broker counted ${r.broker5xx} 5xx answers in /metrics`,
    !r.brokerExit && !r.drained && `the topics did not drain within ${DRAIN_TIMEOUT_MS / 1000} s`,
    !r.brokerExit && r.fds.end > r.fds.start + FD_MARGIN + r.newTopics &&
    `fd leak: ${r.fds.end} fds open after the load, idle baseline ${r.fds.start} ` +
      `(limit ${r.fds.start + FD_MARGIN + r.newTopics})`,
    limits.rssGrowth && g && g.secondMax - g.firstMax > g.allowed &&
    `RSS kept growing: the second half's max ${mib(g.secondMax)} > the first half's ` +
      `${mib(g.firstMax)} + ${mib(g.allowed)} allowed`,
    limits.maxRssBytes && r.rss.max > limits.maxRssBytes &&
    `RSS reached ${mib(r.rss.max)}, above the bound of ${mib(limits.maxRssBytes)}`,
  ].filter((x): x is string => typeof x === "string");
}
