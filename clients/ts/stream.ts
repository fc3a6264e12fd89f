/**
 * `ferry.stream(topic)`: the server-sent events of GET /stream/{topic} as an async iterator of
 * messages, read through a streamed `fetch` (so it runs where there is no EventSource, as in
 * Node, and can send the API key as a header).
 *
 * - **Reconnects** whenever the stream ends or breaks (a restart, a network cut, or nothing
 *   heard for `idleTimeoutMs` although the broker pings every 15 s), waiting 1 s doubling to
 *   32 s, and **resumes** with `Last-Event-ID` set to the last id seen, so the broker first sends
 *   every message stored since that the topic still holds, even after a restart.
 * - **Restarts** are waited out: a broker that stops (drain, SIGTERM) ends the stream with
 *   `event: shutdown`, heard through `onShutdown(reason)`; the end that follows is no failure,
 *   and neither are the failed connects while it is away (RESTART_QUIET_ATTEMPTS of them,
 *   about 30 s: a longer absence is reported to `onError` again).
 * - **Resets** are surfaced through `onReset(reason)`: the broker sends `event: reset` when
 *   messages stored after the resume point have left the topic (acked, expired, dropped) or the
 *   reader fell too far behind. Messages go on arriving after it; the reset is not yielded.
 * - `lastEventId` on the returned object is the id of the last message yielded: keep it to
 *   resume in a later process with `stream(topic, { lastEventId })`.
 * - A refusal waiting cannot mend (401, 403, a bad name) ends the iteration with its FerryError.
 */

import { reconnectDelay, RESTART_QUIET_ATTEMPTS, sleep } from "./backoff.ts";
import { FerryError, FerryUsageError, isBusy, isTransient, problemError } from "./errors.ts";
import type { Http } from "./http.ts";
import { type Filter, filterQuery, type Message } from "./options.ts";
import { SseParser } from "./sse.ts";

/** Options of `ferry.stream()`. */
export interface StreamOptions {
  /** Resume after this event id (a message's sequence number in its topic). */
  lastEventId?: string | number;
  filter?: Filter;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Hears `event: reset`: messages were missed (default: a console warning). */
  onReset?: (reason: string) => void;
  /** Hears `event: shutdown`: the broker is stopping; the stream resumes once it is back. */
  onShutdown?: (reason: string) => void;
  /** Hears each failure before a reconnect (default: nothing). */
  onError?: (err: unknown) => void;
  /** Silence after which the connection counts as dead and is replaced (default 45 s). */
  idleTimeoutMs?: number;
}

/** Three missed pings of the broker's 15 s. */
const DEFAULT_IDLE_MS = 45_000;

/** Thrown into a connection nothing has come through for too long. */
class Idle extends Error {}

/** The live messages of a topic; iterate with `for await`. */
export class EventStream implements AsyncIterable<Message> {
  /** The id of the last message yielded (or the one given to resume from). */
  lastEventId: string | undefined;

  /** Use `ferry.stream()`. */
  constructor(
    private readonly http: Http,
    readonly topic: string,
    private readonly opts: StreamOptions,
  ) {
    this.lastEventId = opts.lastEventId === undefined ? undefined : String(opts.lastEventId);
  }

  /** Connects and yields each message; reconnects until the signal aborts or the loop ends. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Message, void, undefined> {
    const outer = this.opts.signal;
    const path = `/stream/${encodeURIComponent(this.topic)}`;
    let failures = 0;
    /** The broker said it is stopping: its absence is expected, not a failure to report. */
    let restarting = false;
    while (!outer?.aborted) {
      const ac = new AbortController();
      const onAbort = () => ac.abort(outer!.reason);
      outer?.addEventListener("abort", onAbort, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const watch = () => {
        clearTimeout(idle);
        const ms = this.opts.idleTimeoutMs ?? DEFAULT_IDLE_MS;
        idle = setTimeout(() => ac.abort(new Idle(`No event or ping for ${ms} ms`)), ms);
      };
      let waitMs: number | undefined;
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (this.lastEventId !== undefined) headers["last-event-id"] = this.lastEventId;
        const res = await this.http.open(path, filterQuery(this.opts.filter), headers, ac.signal);
        if (res.status !== 200 || !res.body) {
          const text = await res.text();
          const err = problemError(res.status, res.headers, text, `GET ${path}`, undefined);
          if (!isBusy(err)) throw err;
          waitMs = err.retryAfter === undefined ? undefined : err.retryAfter * 1000;
          throw err;
        }
        failures = 0;
        restarting = false;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        const parser = new SseParser(this.lastEventId);
        for (watch();; watch()) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const ev of parser.feed(value)) {
            if (ev.type === "reset") this.#reset(ev.data);
            else if (ev.type === "shutdown") {
              restarting = true;
              this.opts.onShutdown?.(reasonOf(ev.data));
            } else if (ev.type === "message") {
              const msg = this.#parse(ev.data);
              if (!msg) continue;
              if (ev.lastEventId) this.lastEventId = ev.lastEventId;
              clearTimeout(idle); // the caller's time is not silence
              yield msg;
            }
          }
        }
        if (!restarting) throw new Error("The broker ended the event stream");
      } catch (e) {
        if (outer?.aborted) return;
        if (e instanceof FerryError && !isTransient(e)) throw e;
        if (e instanceof FerryUsageError) throw e; // the same call would fail the same way
        const why = ac.signal.reason instanceof Idle ? ac.signal.reason : e;
        if (!restarting || failures >= RESTART_QUIET_ATTEMPTS) this.opts.onError?.(why);
      } finally {
        clearTimeout(idle);
        outer?.removeEventListener("abort", onAbort);
        ac.abort(); // ends the body when the caller leaves the loop
      }
      await sleep(waitMs ?? reconnectDelay(failures++), outer).catch(() => {});
    }
  }

  #reset(data: string): void {
    const reason = reasonOf(data);
    if (this.opts.onReset) this.opts.onReset(reason);
    else console.warn(`ferry: stream("${this.topic}") reset: ${reason}`);
  }

  #parse(data: string): Message | undefined {
    try {
      return JSON.parse(data);
    } catch (e) {
      this.opts.onError?.(e);
      return undefined;
    }
  }
}

/** The `reason` of an event's JSON data, or the data itself. */
function reasonOf(data: string): string {
  try {
    return String(JSON.parse(data).reason ?? data);
  } catch {
    return data; // plain text
  }
}

/** The stream of `topic` through `http`. */
export function stream(http: Http, topic: string, opts: StreamOptions): EventStream {
  return new EventStream(http, topic, opts);
}
