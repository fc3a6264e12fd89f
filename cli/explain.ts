/**
 * Turns anything a command threw into its exit code and one line for stderr that says what to
 * do next: the broker's `detail` for a refusal, "cannot connect" when no answer came. Never a
 * stack trace.
 */

import { FerryError, FerryUsageError } from "../clients/ts/mod.ts";
import { CliFailure, EXIT, oneLine, refused, usage } from "./failure.ts";

/** What to do about a refusal, by problem code, after the broker's own `detail`. */
const ADVICE: Partial<Record<string, string>> = {
  unauthorized: "set FERRY_API_KEY or pass --api-key",
  forbidden: "use an API key with the scope this command needs",
  queue_empty: "publish first, or wait for one with --wait 30s",
  draining: "only a restart of the broker ends a drain",
  electing: "the cluster is electing a leader; retry in a second",
  queue_full: "consume some messages or retry later",
  memory_full: "consume some messages or retry later",
  rate_limited: "this API key publishes past its rate; wait Retry-After seconds",
  internal: "the broker logged it with this request id",
  not_found: "`ferry topics` lists what there is",
  message_not_found: "it was acked already or its lease ran out; check the id and --group",
  already_exists: "nothing was changed",
  payload_too_large: "a message holds at most 2 MiB",
  topic_limit_reached: "delete topics you no longer need, or raise BROKER_MAX_TOPICS",
  bad_response: "is --url / FERRY_URL a Ferry broker?",
};

/** Maps anything a command threw to its exit code and one line for stderr. */
export function explain(e: unknown, url: string): CliFailure {
  if (e instanceof CliFailure) return e;
  if (e instanceof FerryUsageError) return usage(oneLine(e.message)); // nothing was sent
  if (e instanceof FerryError && e.status > 0) {
    const detail = oneLine(e.detail || e.message || `HTTP ${e.status}`);
    const advice = ADVICE[e.code];
    const id = e.code === "internal" && e.requestId ? ` (request id ${e.requestId})` : "";
    return refused(advice ? `${detail}; ${advice}${id}` : detail);
  }
  const why = connectionProblem(e);
  if (why !== undefined) {
    return new CliFailure(
      EXIT.unreachable,
      `Cannot connect to ${url}${why ? `: ${why}` : ""}; start the broker or point --url / ` +
        `FERRY_URL at it`,
    );
  }
  const message = e instanceof Error ? e.message : String(e);
  return new CliFailure(EXIT.refused, `${oneLine(message)}; this looks like a bug in ferry`);
}

/**
 * Why a request never got an answer (refused, reset, DNS, timeout), or undefined when `e` is
 * not a connection failure. It reads the error and its causes: fetch says "fetch failed" and
 * keeps the reason in `cause`, and a client may wrap that again.
 */
export function connectionProblem(e: unknown): string | undefined {
  if (e instanceof FerryUsageError) return undefined; // a TypeError, but thrown before sending
  const chain: unknown[] = [];
  for (let c = e; c && chain.length < 5 && !chain.includes(c); c = (c as Error).cause) {
    chain.push(c);
  }
  const text = chain.map((c) => c instanceof Error ? `${c.name} ${c.message}` : String(c)).join(
    " | ",
  );
  const isTransport = chain.some((c) =>
    c instanceof TypeError || c instanceof Deno.errors.ConnectionRefused ||
    c instanceof Deno.errors.ConnectionReset || c instanceof Deno.errors.TimedOut ||
    (c instanceof DOMException && (c.name === "TimeoutError" || c.name === "AbortError")) ||
    (c instanceof FerryError && !(c.status > 0))
  );
  if (!isTransport) return undefined;
  if (/refused/i.test(text)) return "connection refused";
  if (/reset|closed|broken pipe|eof/i.test(text)) return "the connection was cut";
  if (/dns|lookup|resolve|name or service/i.test(text)) return "cannot resolve the host name";
  if (/time(d)? ?out/i.test(text)) return "no answer in time";
  if (/certificate|tls|ssl/i.test(text)) return "TLS failed";
  return "no answer";
}

/** Why a live command (tail, consume --follow) lost the broker, in a few words. */
export function lostBecause(e: unknown, url: string): string {
  return connectionProblem(e) ?? explain(e, url).message;
}
