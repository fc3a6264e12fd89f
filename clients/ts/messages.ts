/**
 * `ferry.messages(topic)`: a consumer loop that long-polls in batches and settles each message
 * for its user.
 *
 * - **Acks** what the loop body finished: a message counts as finished when the body asks for
 *   the next one. Finished ids go out together in one batch ack, sent while the next long poll
 *   waits (and at each lease check, and when the loop ends).
 * - **Requeues** what the body failed. `run(handler)` sees the error: the message is requeued
 *   with the error's message as `reason`, `onError` hears it, and the loop goes on (as an SQS or
 *   amqplib consumer does). A `for await` body that throws ends the loop, as any `for await`
 *   does, and JavaScript gives the iterator no way to tell a throw from a `break`; so leaving the
 *   loop early requeues the message in hand with a reason that says so. Ack it first
 *   (`ferry.ack`) to keep it, or stop with the `signal`, which lets the body finish and acks it.
 * - **Keeps leases**: every `visibility / 2` it touches each message it holds and has not
 *   finished (the one in hand and the prefetched ones), so a slow body never loses its lease.
 * - **Stops** when `signal` aborts: a long poll in flight is aborted, finished messages are
 *   acked, and prefetched messages not yet started are released at once (POST
 *   /api/queues/release: ready again for other consumers, with no attempt counted).
 * - Messages acked or requeued by hand through the same client are left alone by the loop.
 * - Transient failures (lost connection, timeout, 429, 503) are waited out, 1 s doubling to
 *   32 s; other refusals (a bad name, a missing key) end the loop with their FerryError.
 */

import { reconnectDelay, sleep } from "./backoff.ts";
import { isTransient } from "./errors.ts";
import type {
  BatchAckAnswer,
  ReleaseAnswer,
  RequeueAnswer,
  TouchAnswer,
} from "../../protocol/wire.ts";
import {
  type ConsumeOptions,
  type Duration,
  durationMs,
  durationText,
  type Filter,
  type GroupOptions,
  type Message,
  type RequeueOptions,
} from "./options.ts";

/** Options of `ferry.messages()`. */
export interface MessagesOptions {
  group?: string;
  /** Stops the loop; see the module note. */
  signal?: AbortSignal;
  /** Messages per long poll (default 10). */
  batch?: number;
  /** Long-poll wait (default 20 s; kept under the client's `timeoutMs`). */
  wait?: Duration;
  /** Lease of each delivery (default 30 s); touched every half of it while held. */
  visibility?: Duration;
  filter?: Filter;
  /** Hears handler errors, failed acks, touches and requeues, and polls that will be retried. */
  onError?: (err: unknown, msg?: Message) => void;
}

/** What a handler of `run()` is. */
export type MessageHandler = (msg: Message) => unknown;

/** The reason a message in hand gets when a `for await` loop is left early. */
export const LEFT_EARLY_REASON =
  "the consumer loop ended before finishing the message (break, return or an exception)";
const DEFAULT_BATCH = 10;
const DEFAULT_WAIT_MS = 20_000;
const DEFAULT_VISIBILITY_MS = 30_000;
/** The broker's longest long poll. */
const MAX_WAIT_MS = 30_000;
/** An empty poll is followed by at least this much time (a wait of 0 would spin). */
const IDLE_PAUSE_MS = 1_000;

/** The calls a loop makes: `Ferry`'s. */
export interface LoopClient {
  consume(topic: string, opts: ConsumeOptions): Promise<Message[]>;
  ackMany(topic: string, ids: readonly string[], opts: GroupOptions): Promise<BatchAckAnswer>;
  requeue(msg: Message, opts: RequeueOptions): Promise<RequeueAnswer>;
  release(topic: string, id: string, opts: GroupOptions): Promise<ReleaseAnswer>;
  touch(topic: string, id: string, by: Duration, opts: GroupOptions): Promise<TouchAnswer>;
}

/** Hears acks and requeues made through a client, so a consumer loop forgets those messages. */
export type SettleListener = (topic: string, group: string, ids: readonly string[]) => void;

/** Plumbing the client hands a loop. */
export interface LoopContext {
  /** The client's per-attempt deadline, which the long polls stay under. */
  timeoutMs: number;
  /** Registers a SettleListener; returns its removal. */
  listen: (fn: SettleListener) => () => void;
}

/** A consumer loop: iterate it with `for await`, or hand `run()` a function. */
export class MessageLoop implements AsyncIterable<Message> {
  /** Use `ferry.messages()`. */
  constructor(
    private readonly ferry: LoopClient,
    readonly topic: string,
    private readonly opts: MessagesOptions,
    private readonly ctx: LoopContext,
  ) {}

  /** Iterates with `for await`; each iteration is one message, acked when the body finishes. */
  [Symbol.asyncIterator](): AsyncIterator<Message> {
    const c = new Cursor(this.ferry, this.topic, this.opts, this.ctx);
    return {
      next: () => c.next(),
      return: async () => {
        await c.stop(true);
        return { done: true, value: undefined };
      },
    };
  }

  /**
   * Calls `handler` for each message until the signal aborts: a handler that returns acks its
   * message, one that throws requeues it with the error's message as reason, and the loop goes
   * on. Resolves when stopped; rejects on a refusal that waiting cannot mend.
   */
  async run(handler: MessageHandler): Promise<void> {
    const c = new Cursor(this.ferry, this.topic, this.opts, this.ctx);
    try {
      for (let r = await c.next(); !r.done; r = await c.next()) {
        try {
          await handler(r.value);
        } catch (e) {
          c.report(e, r.value);
          await c.giveBack(r.value, e instanceof Error ? e.message : String(e));
        }
      }
    } finally {
      await c.stop(false);
    }
  }
}

/** One pass of a loop: what it holds, and the lease keeper. */
class Cursor {
  readonly #ac = new AbortController();
  readonly #group: string;
  readonly #batch: number;
  readonly #waitMs: number;
  readonly #visibilityMs: number;
  /** Prefetched, not started. */
  #buffer: Message[] = [];
  /** Yielded to the body, not finished yet. */
  #current: Message | undefined;
  /** Finished, not acked yet. */
  #done: string[] = [];
  #keeper: ReturnType<typeof setInterval> | undefined;
  #stopped = false;
  readonly #unlisten: () => void;

  constructor(
    private readonly ferry: LoopClient,
    private readonly topic: string,
    private readonly opts: MessagesOptions,
    ctx: LoopContext,
  ) {
    this.#group = opts.group ?? "";
    this.#batch = opts.batch ?? DEFAULT_BATCH;
    const wait = opts.wait === undefined ? DEFAULT_WAIT_MS : durationMs(opts.wait);
    this.#waitMs = Math.max(0, Math.min(wait, MAX_WAIT_MS, ctx.timeoutMs - 1_000));
    this.#visibilityMs = opts.visibility === undefined
      ? DEFAULT_VISIBILITY_MS
      : durationMs(opts.visibility);
    const signal = opts.signal;
    if (signal?.aborted) this.#ac.abort(signal.reason);
    else signal?.addEventListener("abort", () => this.#ac.abort(signal.reason), { once: true });
    this.#unlisten = ctx.listen((topic, group, ids) => {
      if (topic === this.topic && group === this.#group) this.#forget(new Set(ids));
    });
  }

  /** Finishes the message in hand and hands out the next; done once stopped. */
  async next(): Promise<IteratorResult<Message, undefined>> {
    if (this.#current) this.#done.push(this.#current.id);
    this.#current = undefined;
    const msg = await this.#take();
    if (!msg) {
      await this.stop(false);
      return { done: true, value: undefined };
    }
    this.#current = msg;
    return { done: false, value: msg };
  }

  /** Tells `onError` (default: a console warning). */
  report(e: unknown, msg?: Message): void {
    if (this.opts.onError) this.opts.onError(e, msg);
    else console.warn(`ferry: messages("${this.topic}"):`, e);
  }

  /** Requeues a message with `reason`; the loop no longer holds it. */
  async giveBack(msg: Message, reason: string): Promise<void> {
    if (this.#current === msg) this.#current = undefined;
    try {
      await this.ferry.requeue(msg, { group: this.#group, reason });
    } catch (e) {
      this.report(e, msg);
    }
  }

  /** Gives a message back unstarted: ready again at once, no attempt counted. */
  async #release(msg: Message): Promise<void> {
    try {
      await this.ferry.release(this.topic, msg.id, { group: this.#group });
    } catch (e) {
      this.report(e, msg);
    }
  }

  /**
   * Ends the pass: aborts a poll in flight, acks the finished, releases the prefetched, and with
   * `leftEarly` requeues the message in hand.
   */
  async stop(leftEarly: boolean): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#keeper);
    this.#ac.abort();
    const inHand = leftEarly ? this.#current : undefined;
    if (!leftEarly && this.#current) this.#done.push(this.#current.id);
    this.#current = undefined;
    const unstarted = this.#buffer;
    this.#buffer = [];
    await Promise.all([
      this.#flush(),
      inHand && this.giveBack(inHand, LEFT_EARLY_REASON),
      ...unstarted.map((m) => this.#release(m)),
    ]);
    this.#unlisten();
  }

  /** The next prefetched message, long-polling for more as needed; undefined once stopped. */
  async #take(): Promise<Message | undefined> {
    let failures = 0;
    while (!this.#ac.signal.aborted) {
      const ready = this.#buffer.shift();
      if (ready) return ready;
      const acks = this.#flush(); // while the poll waits
      try {
        const got = await this.ferry.consume(this.topic, {
          limit: this.#batch,
          timeout: this.#waitMs,
          group: this.#group,
          visibility: durationText(this.#visibilityMs),
          filter: this.opts.filter,
          signal: this.#ac.signal,
        });
        this.#buffer.push(...got);
        failures = 0;
        // A poll that cannot wait would spin on an empty topic.
        if (!got.length && this.#waitMs < IDLE_PAUSE_MS) {
          await sleep(IDLE_PAUSE_MS - this.#waitMs, this.#ac.signal).catch(() => {});
        }
        this.#keeper ??= setInterval(() => this.#keepLeases(), this.#visibilityMs / 2);
      } catch (e) {
        if (this.#ac.signal.aborted) break;
        if (!isTransient(e)) {
          await acks;
          await this.stop(false);
          throw e;
        }
        this.report(e);
        await sleep(reconnectDelay(failures++), this.#ac.signal).catch(() => {});
      } finally {
        await acks;
      }
    }
    return undefined;
  }

  /** Acks what is finished; ids that fail are tried again at the next flush. */
  async #flush(): Promise<void> {
    if (!this.#done.length) return;
    const ids = this.#done;
    this.#done = [];
    try {
      await this.ferry.ackMany(this.topic, ids, { group: this.#group });
    } catch (e) {
      if (!this.#stopped) this.#done.push(...ids);
      this.report(e);
    }
  }

  /** Acks the finished and extends the lease of every other message held. */
  #keepLeases(): void {
    void this.#flush();
    const held = this.#current ? [this.#current, ...this.#buffer] : this.#buffer;
    for (const m of held) {
      this.ferry.touch(this.topic, m.id, this.#visibilityMs, { group: this.#group })
        .catch((e) => this.report(e, m));
    }
  }

  /** Drops messages settled by hand from what the loop holds. */
  #forget(ids: Set<string>): void {
    if (this.#current && ids.has(this.#current.id)) this.#current = undefined;
    this.#buffer = this.#buffer.filter((m) => !ids.has(m.id));
    this.#done = this.#done.filter((id) => !ids.has(id));
  }
}
