/**
 * Soak campaign: `deno run -A tools/soak.ts [--minutes 5] [--rate 2000] [--sample 5s]
 * [--topics 4] [--payload 1024]`. Spawns the real broker on a temp data dir, holds a steady
 * mixed load on it (tests/ops/soak.ts), prints one row per sample (RSS, open fds, depth, rates),
 * then stops the load, waits for the drain, samples three more times idle, and prints a summary.
 * Exit 1 on any 5xx (answered, or counted in /metrics), topics that do not drain in 30 s, open fds
 * after the load more than FD_MARGIN (+1 per new topic) above the idle baseline, or RSS growth:
 * after a warm-up of a quarter of the load, the second half's max RSS may exceed the first half's
 * by max(20 %, 32 MiB) plus 3 × payload per extra held message. Ctrl-C kills the broker too.
 */

import { parseDuration } from "../lib/duration.ts";
import {
  FD_MARGIN,
  RSS_GROWTH_FLOOR_MIB,
  RSS_GROWTH_SHARE,
  RSS_PER_HELD_BYTE,
  runSoak,
  type Sample,
  type SoakOptions,
  type SoakReport,
  verdict,
} from "../tests/ops/soak.ts";

const USAGE =
  "usage: deno run -A tools/soak.ts [--minutes 5] [--rate 2000] [--sample 5s] [--topics 4] " +
  "[--payload 1024]";
const MIB = 1024 * 1024;

/** Reads the flags; a bad one prints the usage and exits 2. */
function parseArgs(args: string[]): SoakOptions {
  const flags: Record<string, string> = {
    minutes: "5",
    rate: "2000",
    sample: "5s",
    topics: "4",
    payload: "1024",
  };
  for (let i = 0; i < args.length; i++) {
    const [name, inline] = args[i]!.replace(/^--/, "").split("=", 2) as [string, string?];
    if (!(name in flags) || !args[i]!.startsWith("--")) fail(`unknown argument "${args[i]}"`);
    flags[name] = inline ?? args[++i] ?? fail(`--${name} needs a value`);
  }
  const num = (name: string, min: number) => {
    const v = Number(flags[name]);
    return Number.isFinite(v) && v >= min ? v : fail(`--${name} must be a number ≥ ${min}`);
  };
  let sampleMs = 0;
  try {
    sampleMs = parseDuration(flags.sample!, "--sample");
  } catch (e) {
    fail((e as Error).message);
  }
  return {
    durationMs: num("minutes", 0.1) * 60_000,
    ratePerSec: num("rate", 1),
    sampleMs: Math.max(sampleMs, 250),
    topics: Math.round(num("topics", 1)),
    payloadBytes: Math.round(num("payload", 1)),
    idleMs: 3 * Math.max(sampleMs, 250),
  };
}

function fail(message: string): never {
  console.error(`soak: ${message}\n${USAGE}`);
  Deno.exit(2);
}

const mib = (b: number) => Number.isNaN(b) ? "n/a" : (b / MIB).toFixed(1);
const pad = (v: string | number, n: number) => String(v).padStart(n);

function row(s: Sample): string {
  return [
    pad(s.t.toFixed(0), 6),
    s.phase.padEnd(6),
    pad(mib(s.rssBytes), 9),
    pad(s.fds, 5),
    pad(s.depth, 7),
    pad(s.inFlight, 9),
    pad(s.held, 7),
    pad(s.publishPerSec.toFixed(0), 7),
    pad(s.ackPerSec.toFixed(0), 7),
  ].join(" ");
}

function summary(r: SoakReport, o: SoakOptions): string {
  const odd = Object.entries(r.statuses).filter(([s]) => !/^2|^404$/.test(s));
  const g = r.rssGrowth;
  return [
    `RSS MiB: start ${mib(r.rss.start)}, after warm-up ${mib(r.rss.warm)}, ` +
    `max ${mib(r.rss.max)}, end ${mib(r.rss.end)}`,
    `open fds: start ${r.fds.start}, max ${r.fds.max}, end ${r.fds.end} ` +
    `(limit ${r.fds.start + FD_MARGIN + r.newTopics}: + ${FD_MARGIN} + ${r.newTopics} new topics)`,
    `messages: published ${r.published}, acked ${r.acked}, requeued ${r.requeued}, ` +
    `dead-lettered ${r.deadLettered}; drained: ${r.drained ? "yes" : "NO"}`,
    `answers other than 2xx/404: ${odd.length ? odd.map(([s, n]) => `${s} × ${n}`) : "none"}; ` +
    `5xx counted by the broker: ${r.broker5xx}; transport errors: ${r.transportErrors}`,
    `held connections (silent or half-sent, kept open through the load): ${r.held.opened}, ` +
    `closed by the broker: ${r.held.closedByBroker}`,
    g
      ? `RSS growth after warm-up: first half max ${mib(g.firstMax)}, second half max ` +
        `${mib(g.secondMax)} MiB (allowed +${mib(g.allowed)}: max(${RSS_GROWTH_SHARE * 100} %, ` +
        `${RSS_GROWTH_FLOOR_MIB} MiB) + ${RSS_PER_HELD_BYTE} × payload per extra held message)`
      : `RSS growth not judged: too few samples (sample ${o.sampleMs} ms)`,
  ].join("\n");
}

if (import.meta.main) {
  const o = parseArgs(Deno.args);
  const abort = new AbortController();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => abort.abort(new Error(`interrupted by ${sig}`)));
  }
  console.log(
    `soak: ${o.durationMs / 60_000} min at ${o.ratePerSec} msg/s over ${o.topics} topics, ` +
      `${o.payloadBytes} B payloads, a sample every ${o.sampleMs} ms; BROKER_FSYNC=always`,
  );
  console.log("   t/s phase  RSS/MiB   fds   depth in_flight    held   pub/s   ack/s");
  let report: SoakReport;
  try {
    report = await runSoak(o, { onSample: (s) => console.log(row(s)), signal: abort.signal });
  } catch (e) {
    console.error(`soak: ${(e as Error).message}`);
    Deno.exit(abort.signal.aborted ? 130 : 1);
  }
  console.log(summary(report, o));
  const reasons = verdict(report, { rssGrowth: true });
  console.log(reasons.length ? `FAIL\n- ${reasons.join("\n- ")}` : "PASS");
  Deno.exit(reasons.length ? 1 : 0);
}
