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
 * - **Keeps leases**: four times a lease it touches, in one batch touch (POST /touch/{topic}),
 *   the messages it holds and has not finished (the one in hand and the prefetched ones) whose
 *   lease would end before the check after next, so a slow body never loses its lease. Without
 *   `visibility` the lease is the topic's, whose length the first touch's answer gives.
 * - **Stops** when `signal` aborts (or `ferry.close()`): a long poll in flight is aborted, the
 *   body in hand may finish, finished messages are acked, and prefetched messages not yet
 *   started are released, all at once (POST /api/queues/release: ready again for other
 *   consumers, with no attempt counted). All of it within `shutdownTimeoutMs`: a `run()`
 *   handler's own signal aborts then, and its settle gets a quarter of that more (5 s at most).
 *   What the shutdown could not do ends the loop with an AggregateError of the failures.
 * - Messages acked or requeued by hand through the same client are left alone by the loop.
 * - Transient failures (lost connection, timeout, 429, 503) are waited out, 1 s doubling to
 *   32 s; other refusals (a bad name, a missing key) end the loop with their FerryError.
 */

import { reconnectDelay, sleep } from "./backoff.ts";
import { FerryClosedError, isTransient } from "./errors.ts";
import { SETTLING, type SettlingOption } from "./http.ts";
import type {
  BatchAckAnswer,
  BatchTouchAnswer,
  ReleaseAnswer,
  RequeueAnswer,
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
  /** Lease of each delivery (absent or 0: the topic's); kept by batch touches while held. */
  visibility?: Duration;
  /**
   * How long stopping may take once `signal` aborts (default 30 s): the body in hand, then the
   * acks and releases. A `run()` handler's signal aborts when it has passed.
   */
  shutdownTimeoutMs?: number;
  filter?: Filter;
  /** Hears handler errors, failed acks, touches and requeues, and polls that will be retried. */
  onError?: (err: unknown, msg?: Message) => void;
}

/**
 * What a handler of `run()` is. `signal` is not the loop's: it aborts only when a stop has taken
 * `shutdownTimeoutMs`, so a handler running when the loop is stopped may finish.
 */
export type MessageHandler = (msg: Message, signal: AbortSignal) => unknown;

/** The reason a message in hand gets when a `for await` loop is left early. */
export const LEFT_EARLY_REASON =
  "the consumer loop ended before finishing the message (break, return or an exception)";
const DEFAULT_BATCH = 10;
const DEFAULT_WAIT_MS = 20_000;
/** How long a stop may take unless `shutdownTimeoutMs` says (NATS's drain timeout). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;
/** Longest extra time the settle of a handler that outlived the shutdown timeout gets. */
const MAX_SETTLE_GRACE_MS = 5_000;
/** How often the lease keeper looks while the topic's lease is not known yet. */
const UNKNOWN_LEASE_TICK_MS = 1_000;
/** The broker's longest long poll. */
const MAX_WAIT_MS = 30_000;
/** An empty poll is followed by at least this much time (a wait of 0 would spin). */
const IDLE_PAUSE_MS = 1_000;

/** Options of a loop's settle calls. */
type SettleOptions = GroupOptions & SettlingOption;

/** The calls a loop makes: `Ferry`'s. */
export interface LoopClient {
  consume(topic: string, opts: ConsumeOptions): Promise<Message[]>;
  ackMany(topic: string, ids: readonly string[], opts: SettleOptions): Promise<BatchAckAnswer>;
  requeue(msg: Message, opts: RequeueOptions & SettlingOption): Promise<RequeueAnswer>;
  release(topic: string, id: string, opts: SettleOptions): Promise<ReleaseAnswer>;
  touchMany(
    topic: string,
    ids: readonly string[],
    by: Duration | undefined,
    opts: SettleOptions,
  ): Promise<BatchTouchAnswer>;
}

/** Hears acks and requeues made through a client, so a consumer loop forgets those messages. */
export type SettleListener = (topic: string, group: string, ids: readonly string[]) => void;

/** Plumbing the client hands a loop. */
export interface LoopContext {
  /** The client's per-attempt deadline, which the long polls stay under. */
  timeoutMs: number;
  /** Registers a SettleListener; returns its removal. */
  listen: (fn: SettleListener) => () => void;
  /**
   * Registers a running pass with `ferry.close()`, which calls `stop` and waits for it; returns
   * its removal.
   */
  track: (stop: () => Promise<void>) => () => void;
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
        c.throwFailures();
        return { done: true, value: undefined };
      },
    };
  }

  /**
   * Calls `handler` for each message until the signal aborts: a handler that returns acks its
   * message, one that throws requeues it with the error's message as reason, and the loop goes
   * on. Resolves when stopped; rejects on a refusal that waiting cannot mend, and with an
   * AggregateError when the shutdown could not settle everything.
   */
  async run(handler: MessageHandler): Promise<void> {
    const c = new Cursor(this.ferry, this.topic, this.opts, this.ctx);
    try {
      for (let r = await c.next(); !r.done; r = await c.next()) {
        const msg = r.value;
        const outcome = await c.bounded(
          Promise.resolve().then(() => handler(msg, c.handlerSignal)).then(
            () => undefined,
            (e) => ({ e }),
          ),
        );
        if (outcome === "late") {
          c.abandon(msg);
          continue;
        }
        if (outcome) {
          c.report(outcome.e, msg);
          await c.giveBack(msg, outcome.e instanceof Error ? outcome.e.message : String(outcome.e));
        }
      }
    } finally {
      await c.stop(false);
    }
    c.throwFailures();
  }
}

/** One pass of a loop: what it holds, the lease keeper, and the shutdown. */
class Cursor {
  /** Aborts the long poll: the stop signal. */
  readonly #ac = new AbortController();
  /** Aborts when a stop has taken `shutdownTimeoutMs`: the handler's signal. */
  readonly #handlerAc = new AbortController();
  /** Aborts the shutdown's settle calls, a grace after the handler's. */
  readonly #settleAc = new AbortController();
  readonly #group: string;
  readonly #batch: number;
  readonly #waitMs: number;
  /** The lease asked for each delivery; undefined: the topic's. */
  readonly #visibilityMs: number | undefined;
  readonly #shutdownMs: number;
  /** The leases' length: visibility, or the topic's once a touch answered it (0: unknown). */
  #leaseMs: number;
  /** Prefetched, not started. */
  #buffer: Message[] = [];
  /** Yielded to the body, not finished yet. */
  #current: Message | undefined;
  /** When the lease of each held message ends (performance.now() ms), by id. */
  readonly #until = new Map<string, number>();
  /** Finished, not acked yet. */
  #done: string[] = [];
  #keeper: ReturnType<typeof setTimeout> | undefined;
  #deadline: ReturnType<typeof setTimeout> | undefined;
  #stopping = false;
  #stopped: Promise<void> | undefined;
  /** Resolves once the pass has stopped. */
  readonly #ended: Promise<void>;
  #markEnded = () => {};
  /** What the shutdown could not do. */
  readonly #failures: unknown[] = [];
  readonly #unlisten: () => void;
  readonly #untrack: () => void;

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
    const visibility = opts.visibility === undefined ? 0 : durationMs(opts.visibility);
    this.#visibilityMs = visibility > 0 ? visibility : undefined;
    this.#leaseMs = visibility;
    this.#shutdownMs = opts.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
    this.#ended = new Promise((resolve) => this.#markEnded = resolve);
    const signal = opts.signal;
    if (signal?.aborted) this.#abort(signal.reason);
    else signal?.addEventListener("abort", () => this.#abort(signal.reason), { once: true });
    this.#unlisten = ctx.listen((topic, group, ids) => {
      if (topic === this.topic && group === this.#group) this.#forget(new Set(ids));
    });
    this.#untrack = ctx.track(async () => {
      this.#abort(new FerryClosedError(`messages("${this.topic}")`));
      // A loop nobody iterates any more never stops: wait at most the shutdown's time.
      await this.bounded(this.#ended);
    });
  }

  /** The signal `run()` hands its handler. */
  get handlerSignal(): AbortSignal {
    return this.#handlerAc.signal;
  }

  /** The stop: ends the long poll and starts the shutdown's clock. */
  #abort(reason: unknown): void {
    if (this.#ac.signal.aborted) return;
    this.#ac.abort(reason);
    const grace = Math.min(this.#shutdownMs / 4, MAX_SETTLE_GRACE_MS);
    this.#deadline = setTimeout(() => {
      this.#handlerAc.abort(new Error(`The shutdown took ${this.#shutdownMs} ms`));
      this.#deadline = setTimeout(() => this.#settleAc.abort(), grace);
    }, this.#shutdownMs);
  }

  /** Finishes the message in hand and hands out the next; done once stopped. */
  async next(): Promise<IteratorResult<Message, undefined>> {
    this.#finish(this.#current);
    const msg = await this.#take();
    if (!msg) {
      await this.stop(false);
      this.throwFailures();
      return { done: true, value: undefined };
    }
    this.#current = msg;
    return { done: false, value: msg };
  }

  /**
   * `p`, or "late" once the shutdown timeout and the settle grace have passed after a stop (a
   * handler that ignores its signal is not waited for longer).
   */
  async bounded<T>(p: Promise<T>): Promise<T | "late"> {
    const late = this.#settleAc.signal;
    if (late.aborted) return "late";
    let onLate = () => {};
    const timeUp = new Promise<"late">((resolve) => {
      onLate = () => resolve("late");
      late.addEventListener("abort", onLate, { once: true });
    });
    try {
      return await Promise.race([p, timeUp]);
    } finally {
      late.removeEventListener("abort", onLate);
    }
  }

  /** A handler still running past the shutdown: its message stays leased until its lease ends. */
  abandon(msg: Message): void {
    if (this.#current === msg) this.#current = undefined;
    this.#until.delete(msg.id);
    this.#fail(
      new Error(
        `messages("${this.topic}"): the handler of ${msg.id} still ran ${this.#shutdownMs} ms ` +
          `after the stop (shutdownTimeoutMs); its message stays leased until its lease ends`,
      ),
      msg,
    );
  }

  /** Throws an AggregateError of what the shutdown could not do, if anything. */
  throwFailures(): void {
    if (!this.#failures.length) return;
    const n = this.#failures.length;
    throw new AggregateError(
      this.#failures.splice(0),
      `Cannot stop messages("${this.topic}") cleanly: ${n} settle${n > 1 ? "s" : ""} failed ` +
        `(the leases of those messages end by themselves)`,
    );
  }

  /** Tells `onError` (default: a console warning). */
  report(e: unknown, msg?: Message): void {
    if (this.opts.onError) this.opts.onError(e, msg);
    else console.warn(`ferry: messages("${this.topic}"):`, e);
  }

  /** Reports a failed request; one of the shutdown is kept for throwFailures. */
  #fail(e: unknown, msg?: Message): void {
    if (this.#stopping || this.#ac.signal.aborted) this.#failures.push(e);
    this.report(e, msg);
  }

  /** The options of a settle call: bounded by the shutdown once stopping. */
  #settleOpts(): GroupOptions & SettlingOption {
    return { group: this.#group, signal: this.#settleAc.signal, [SETTLING]: true };
  }

  /** Requeues a message with `reason`; the loop no longer holds it. */
  async giveBack(msg: Message, reason: string): Promise<void> {
    if (this.#current === msg) this.#current = undefined;
    this.#until.delete(msg.id);
    try {
      await this.ferry.requeue(msg, { ...this.#settleOpts(), reason });
    } catch (e) {
      this.#fail(e, msg);
    }
  }

  /** Gives a message back unstarted: ready again at once, no attempt counted. */
  async #release(msg: Message): Promise<void> {
    try {
      await this.ferry.release(this.topic, msg.id, this.#settleOpts());
    } catch (e) {
      this.#fail(e, msg);
    }
  }

  /** Counts `msg` as finished: it is acked at the next flush. */
  #finish(msg: Message | undefined): void {
    if (!msg) return;
    this.#done.push(msg.id);
    this.#until.delete(msg.id);
    if (this.#current === msg) this.#current = undefined;
  }

  /**
   * Ends the pass: aborts a poll in flight, acks the finished, releases the prefetched (all at
   * once), and with `leftEarly` requeues the message in hand. Bounded by `shutdownTimeoutMs`.
   */
  stop(leftEarly: boolean): Promise<void> {
    this.#stopped ??= this.#stop(leftEarly);
    return this.#stopped;
  }

  async #stop(leftEarly: boolean): Promise<void> {
    this.#stopping = true;
    this.#abort(undefined);
    clearTimeout(this.#keeper);
    const inHand = leftEarly ? this.#current : undefined;
    if (!leftEarly) this.#finish(this.#current);
    this.#current = undefined;
    const unstarted = this.#buffer;
    this.#buffer = [];
    await Promise.all([
      this.#flush(),
      inHand && this.giveBack(inHand, LEFT_EARLY_REASON),
      ...unstarted.map((m) => this.#release(m)),
    ]);
    clearTimeout(this.#deadline);
    this.#unlisten();
    this.#untrack();
    this.#markEnded();
  }

  /** The next prefetched message, long-polling for more as needed; undefined once stopped. */
  async #take(): Promise<Message | undefined> {
    let failures = 0;
    while (!this.#ac.signal.aborted) {
      const ready = this.#buffer.shift();
      if (ready) return ready;
      const acks = this.#flush(); // while the poll waits
      try {
        const sent = performance.now();
        const got = await this.ferry.consume(this.topic, {
          limit: this.#batch,
          timeout: this.#waitMs,
          group: this.#group,
          visibility: this.#visibilityMs === undefined
            ? undefined
            : durationText(this.#visibilityMs),
          filter: this.opts.filter,
          signal: this.#ac.signal,
        });
        this.#hold(got, sent);
        failures = 0;
        // A poll that cannot wait would spin on an empty topic.
        if (!got.length && this.#waitMs < IDLE_PAUSE_MS) {
          await sleep(IDLE_PAUSE_MS - this.#waitMs, this.#ac.signal).catch(() => {});
        }
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

  /**
   * Holds what a poll got. Its lease began when the broker answered: after `sent`, and at most
   * about a tick before the answer came (a long poll waits), which the keeper's margin covers.
   * While the topic's lease is unknown, the keeper touches them at once to learn it.
   */
  #hold(got: Message[], sent: number): void {
    this.#buffer.push(...got);
    const began = Math.max(sent, performance.now() - this.#tickMs());
    for (const m of got) this.#until.set(m.id, began + this.#leaseMs);
    if (this.#keeper === undefined || (this.#leaseMs === 0 && got.length)) {
      clearTimeout(this.#keeper);
      this.#keeper = setTimeout(() => this.#keepLeases(), this.#leaseMs === 0 ? 0 : this.#tickMs());
    }
  }

  /** How often the keeper looks: a quarter of the lease (1 s while it is unknown). */
  #tickMs(): number {
    return this.#leaseMs > 0 ? Math.max(this.#leaseMs / 4, 5) : UNKNOWN_LEASE_TICK_MS;
  }

  /** Acks what is finished; ids that fail are tried again at the next flush. */
  async #flush(): Promise<void> {
    if (!this.#done.length) return;
    const ids = this.#done;
    this.#done = [];
    try {
      await this.ferry.ackMany(this.topic, ids, this.#settleOpts());
    } catch (e) {
      if (!this.#stopping) this.#done.push(...ids);
      this.#fail(e);
    }
  }

  /**
   * Acks the finished, and touches in one request the held messages whose lease ends before the
   * check after next (all of them while the topic's lease is unknown); then looks again a tick
   * later.
   */
  async #keepLeases(): Promise<void> {
    if (this.#stopping) return;
    void this.#flush();
    const tick = this.#tickMs();
    const horizon = performance.now() + 2 * tick;
    const held = this.#current ? [this.#current, ...this.#buffer] : this.#buffer;
    const due = held.filter((m) => this.#leaseMs === 0 || this.#until.get(m.id)! < horizon)
      .map((m) => m.id);
    if (due.length) {
      const sent = performance.now();
      try {
        const r = await this.ferry.touchMany(this.topic, due, this.#visibilityMs, {
          group: this.#group,
          signal: this.#settleAc.signal,
        });
        if (this.#visibilityMs === undefined && r.lease_ms > 0) this.#leaseMs = r.lease_ms;
        for (const id of due) {
          if (this.#until.has(id)) this.#until.set(id, sent + this.#leaseMs);
        }
      } catch (e) {
        if (!this.#stopping) this.report(e); // the next check tries again
      }
    }
    if (!this.#stopping) this.#keeper = setTimeout(() => this.#keepLeases(), this.#tickMs());
  }

  /** Drops messages settled by hand from what the loop holds. */
  #forget(ids: Set<string>): void {
    if (this.#current && ids.has(this.#current.id)) this.#current = undefined;
    this.#buffer = this.#buffer.filter((m) => !ids.has(m.id));
    this.#done = this.#done.filter((id) => !ids.has(id));
    for (const id of ids) this.#until.delete(id);
  }
}
