/**
 * `Ferry`, the client: publish, consume, ack, requeue and touch over HTTP, the `messages()`
 * consumer loop, WebSocket `subscribe`, and the `stream` of server-sent events; the operator
 * calls come from `FerryAdmin`.
 */

import type {
  BatchAckAnswer,
  BatchPublishAnswer,
  BatchPublishMessage,
  BatchTouchAnswer,
  BroadcastAnswer,
  PublishAnswer,
  RequeueAnswer,
  TouchAnswer,
} from "../../protocol/wire.ts";
import { FerryAdmin, seg } from "./admin.ts";
import { FerryClosedError } from "./errors.ts";
import { Http } from "./http.ts";
import { MessageLoop, type MessagesOptions, type SettleListener } from "./messages.ts";
import {
  type BatchMessage,
  type ConsumeOptions,
  type Duration,
  durationText,
  type FerryOptions,
  filterQuery,
  type GroupOptions,
  type Message,
  type PublishBatchOptions,
  type PublishOptions,
  type RequeueOptions,
} from "./options.ts";
import { encodeBody, type PublishBody, toBase64 } from "./payload.ts";
import { type EventStream, stream, type StreamOptions } from "./stream.ts";
import { type Handler, type SubscribeOptions, Subscription } from "./subscribe.ts";

/** The broker a client talks to when given no `url`. */
export const DEFAULT_URL = "http://127.0.0.1:7800";
/** Default deadline of one request attempt (spec §8: 60 s). */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** Most ids one batch ack carries; `ackMany` splits longer lists. */
const MAX_BATCH_ACK = 10_000;

/** A Ferry client. Safe to share: it holds no connection of its own but the platform's pool. */
export class Ferry extends FerryAdmin {
  readonly #autoKey: boolean;
  readonly #WebSocket: typeof WebSocket | undefined;
  readonly #settled = new Set<SettleListener>();
  /** The stops of the running consumer loops, for close(). */
  readonly #loops = new Set<() => Promise<void>>();
  readonly #subscriptions = new Set<Subscription>();
  /** Aborts on close(): ends the event streams. */
  readonly #life = new AbortController();
  #closing: Promise<void> | undefined;

  /** A client of the broker at `opts.url` (default `http://127.0.0.1:7800`). */
  constructor(opts: FerryOptions = {}) {
    super(
      new Http({
        url: (opts.url ?? DEFAULT_URL).replace(/\/+$/, ""),
        apiKey: opts.apiKey,
        timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        retries: opts.retries ?? 3,
        retryDelayMs: opts.retryDelayMs ?? 200,
        maxRetryDelayMs: opts.maxRetryDelayMs ?? 5_000,
        fetch: opts.fetch ??
          ((input, init) => globalThis.fetch(input, { ...opts.fetchOptions, ...init })),
        onRetry: opts.onRetry,
        clusterNodes: opts.clusterNodes,
      }),
    );
    this.#autoKey = opts.idempotencyKey === "auto";
    this.#WebSocket = opts.WebSocket;
  }

  /** The broker's base URL. */
  get url(): string {
    return this.http.settings.url;
  }

  /**
   * Publishes one message (POST /publish/{topic}): a string as text, bytes as they are, any other
   * value as JSON. Retried after a lost connection only when it carries an idempotency key.
   */
  publish(
    topic: string,
    body: PublishBody,
    opts: PublishOptions & { broadcast: true },
  ): Promise<BroadcastAnswer>;
  /** Publishes one message; the answer has its `id`, or `deduplicated: true` for a repeat key. */
  publish(
    topic: string,
    body: PublishBody,
    opts?: PublishOptions & { broadcast?: false },
  ): Promise<PublishAnswer>;
  /** Publishes one message, or broadcasts it when `opts.broadcast` is true. */
  publish(
    topic: string,
    body: PublishBody,
    opts?: PublishOptions,
  ): Promise<PublishAnswer | BroadcastAnswer>;
  publish(
    topic: string,
    body: PublishBody,
    opts: PublishOptions = {},
  ): Promise<PublishAnswer | BroadcastAnswer> {
    const { data, type } = encodeBody(body);
    const headers: Record<string, string> = { "content-type": opts.contentType ?? type };
    for (const [name, value] of Object.entries(opts.headers ?? {})) {
      headers[/^x-mq-/i.test(name) ? name : `X-MQ-${name}`] = value;
    }
    let key = opts.idempotencyKey ?? (this.#autoKey ? "auto" : undefined);
    if (key === "auto") key = crypto.randomUUID();
    if (key !== undefined) headers["idempotency-key"] = key;
    return this.call({
      method: "POST",
      path: `/publish/${seg(topic)}`,
      query: {
        ttl: opts.ttl === undefined ? undefined : durationText(opts.ttl),
        delay: opts.delay === undefined ? undefined : durationText(opts.delay),
        priority: opts.priority,
        broadcast: opts.broadcast || undefined,
        idempotency: opts.payloadKey ? "auto" : undefined,
      },
      body: data,
      headers,
      idempotent: key !== undefined || opts.payloadKey === true,
    }, opts);
  }

  /**
   * Publishes many messages in one request (POST /publish/{topic}/batch, at most 1,000), all or
   * nothing: a refused batch stores none of them. A string is sent as text, bytes as they are.
   * Resolves with one answer per message, in order (`deduplicated: true` for a repeated key).
   * Retried after a lost connection only when every message carries an idempotency key (or
   * with `payloadKey`).
   */
  async publishBatch(
    topic: string,
    messages: readonly (string | Uint8Array | BatchMessage)[],
    opts: PublishBatchOptions = {},
  ): Promise<PublishAnswer[]> {
    if (messages.length === 0) return [];
    let keyed = true;
    const items = messages.map((m): BatchPublishMessage => {
      const msg: BatchMessage = typeof m === "string" || m instanceof Uint8Array
        ? { payload: m }
        : m;
      const item: BatchPublishMessage = typeof msg.payload === "string"
        ? { payload_text: msg.payload }
        : { payload: toBase64(msg.payload) };
      if (msg.ttl !== undefined) item.ttl = durationText(msg.ttl);
      if (msg.delay !== undefined) item.delay = durationText(msg.delay);
      if (msg.priority !== undefined) item.priority = msg.priority;
      let key = msg.idempotencyKey ?? (this.#autoKey ? "auto" : undefined);
      if (key === "auto") key = crypto.randomUUID();
      if (key !== undefined) item.idempotency_key = key;
      else keyed = false;
      if (msg.headers) {
        item.headers = {};
        for (const [name, value] of Object.entries(msg.headers)) {
          item.headers[/^x-mq-/i.test(name) ? name : `X-MQ-${name}`] = value;
        }
      }
      if (msg.contentType !== undefined) item.content_type = msg.contentType;
      return item;
    });
    const answer = await this.call<BatchPublishAnswer>({
      method: "POST",
      path: `/publish/${seg(topic)}/batch`,
      query: { idempotency: opts.payloadKey ? "auto" : undefined },
      json: items,
      idempotent: keyed || opts.payloadKey === true,
    }, opts);
    return answer.messages;
  }

  /**
   * Takes up to `limit` messages (GET /consume/{topic}); `[]` when there is none within
   * `timeout`. Each stays leased until acked, requeued or its visibility ends. Retried after a
   * lost connection: what the lost answer held comes back when its lease ends.
   */
  async consume(topic: string, opts: ConsumeOptions = {}): Promise<Message[]> {
    const body = await this.call<Message | Message[] | undefined>({
      method: "GET",
      path: `/consume/${seg(topic)}`,
      query: {
        limit: opts.limit,
        timeout: opts.timeout === undefined ? undefined : durationText(opts.timeout),
        group: opts.group || undefined,
        auto_ack: opts.autoAck || undefined,
        peek: opts.peek || undefined,
        visibility: opts.visibility === undefined ? undefined : durationText(opts.visibility),
        ...filterQuery(opts.filter),
      },
      idempotent: true,
      empty: "queue_empty",
    }, opts);
    return body === undefined ? [] : Array.isArray(body) ? body : [body];
  }

  /** Acks one delivered message (POST /ack/{topic}/{id}); 404 `message_not_found` if not held. */
  async ack(topic: string, id: string, opts: GroupOptions = {}): Promise<void> {
    await this.call({
      method: "POST",
      path: `/ack/${seg(topic)}/${seg(id)}`,
      query: { group: opts.group || undefined },
      idempotent: true,
      doneOnRetry: "message_not_found",
    }, opts);
    this.#settle(topic, opts.group, [id]);
  }

  /** Acks many (POST /ack/{topic}, 10,000 ids per request); unknown ids come back in `not_found`. */
  async ackMany(topic: string, ids: readonly string[], opts: GroupOptions = {}): Promise<
    BatchAckAnswer
  > {
    const out: BatchAckAnswer = { acked: 0, not_found: [] };
    for (let i = 0; i < ids.length; i += MAX_BATCH_ACK) {
      const chunk = ids.slice(i, i + MAX_BATCH_ACK);
      const r = await this.call<BatchAckAnswer>({
        method: "POST",
        path: `/ack/${seg(topic)}`,
        query: { group: opts.group || undefined },
        json: { ids: chunk },
        idempotent: true,
      }, opts);
      out.acked += r.acked;
      out.not_found.push(...r.not_found);
      this.#settle(topic, opts.group, chunk);
    }
    return out;
  }

  /**
   * Gives a delivered message back (POST /requeue): ready again after `delay`, with
   * `retry_count` + 1, or moved to `{topic}.dlq` on the third attempt (at once with
   * `deadLetter`). Not retried after a lost connection, since it may have been done.
   */
  async requeue(
    msg: Pick<Message, "id" | "topic" | "group">,
    opts: RequeueOptions = {},
  ): Promise<RequeueAnswer> {
    const group = opts.group ?? msg.group;
    const answer = await this.call<RequeueAnswer>({
      method: "POST",
      path: "/requeue",
      json: {
        id: msg.id,
        topic: msg.topic,
        group: group || undefined,
        reason: opts.reason,
        delay: opts.delay === undefined ? undefined : durationText(opts.delay),
        dead_letter: opts.deadLetter || undefined,
      },
      idempotent: false,
    }, opts);
    this.#settle(msg.topic, group, [msg.id]);
    return answer;
  }

  /**
   * Extends many leases to `by` from now (POST /touch/{topic}, 10,000 ids per request; default:
   * the topic's visibility); ids not in flight come back in `not_found`.
   */
  async touchMany(
    topic: string,
    ids: readonly string[],
    by?: Duration,
    opts: GroupOptions = {},
  ): Promise<BatchTouchAnswer> {
    const out: BatchTouchAnswer = { touched: 0, not_found: [], visible_at: "", lease_ms: 0 };
    for (let i = 0; i < ids.length; i += MAX_BATCH_ACK) {
      const r = await this.call<BatchTouchAnswer>({
        method: "POST",
        path: `/touch/${seg(topic)}`,
        query: {
          by: by === undefined ? undefined : durationText(by),
          group: opts.group || undefined,
        },
        json: { ids: ids.slice(i, i + MAX_BATCH_ACK) },
        idempotent: true,
      }, opts);
      out.touched += r.touched;
      out.not_found.push(...r.not_found);
      out.visible_at = r.visible_at;
      out.lease_ms = r.lease_ms;
    }
    return out;
  }

  /** Extends a lease to `by` from now (POST /touch/{topic}/{id}; default: the topic's visibility). */
  touch(topic: string, id: string, by?: Duration, opts: GroupOptions = {}): Promise<TouchAnswer> {
    return this.call({
      method: "POST",
      path: `/touch/${seg(topic)}/${seg(id)}`,
      query: {
        by: by === undefined ? undefined : durationText(by),
        group: opts.group || undefined,
      },
      idempotent: true,
    }, opts);
  }

  /**
   * A consumer loop over `topic`: `for await (const msg of ferry.messages("orders"))`. Each
   * message is acked once the loop body finishes with it; see MessageLoop for the rules.
   */
  messages(topic: string, opts: MessagesOptions = {}): MessageLoop {
    return new MessageLoop(this, topic, opts, {
      timeoutMs: this.http.settings.timeoutMs,
      listen: (fn) => {
        this.#settled.add(fn);
        return () => this.#settled.delete(fn);
      },
      track: (stop) => {
        this.#loops.add(stop);
        return () => this.#loops.delete(stop);
      },
    });
  }

  /**
   * Opens a WebSocket (GET /ws) subscribed to `pattern` (`orders`, `orders.*`, `*`); with a
   * `group` or `prefetch` it consumes instead of spying. Reconnects by itself; see Subscription.
   */
  subscribe(pattern: string, handler: Handler, opts: SubscribeOptions = {}): Subscription {
    if (this.http.closed) throw new FerryClosedError("GET /ws");
    const sub = new Subscription(this, {
      url: this.url,
      apiKey: this.http.settings.apiKey,
      WebSocket: this.#WebSocket,
      onClose: () => this.#subscriptions.delete(sub),
    });
    this.#subscriptions.add(sub);
    sub.subscribe(pattern, handler, opts);
    return sub;
  }

  /**
   * The live server-sent events of `topic` (GET /stream/{topic}) as messages; reconnects by
   * itself and resumes after the last event seen. See EventStream.
   */
  stream(topic: string, opts: StreamOptions = {}): EventStream {
    const signal = opts.signal
      ? AbortSignal.any([opts.signal, this.#life.signal])
      : this.#life.signal;
    return stream(this.http, topic, { ...opts, signal });
  }

  /**
   * Closes the client: consumer loops stop as when their signal aborts (each within its
   * `shutdownTimeoutMs`, their shutdown work still sent), subscriptions close, event streams end;
   * resolves once they have. Later calls reject with a FerryClosedError (`code` `closed`); calls
   * in flight finish. Closing again resolves with the first close.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.http.closed = true;
      this.#life.abort(new FerryClosedError("close()"));
      await Promise.all([
        ...[...this.#loops].map((stop) => stop()),
        ...[...this.#subscriptions].map((sub) => sub.close()),
      ]);
    })();
    return this.#closing;
  }

  /** Tells the consumer loops that these messages were acked or requeued by hand. */
  #settle(topic: string, group: string | undefined, ids: readonly string[]): void {
    for (const fn of this.#settled) fn(topic, group ?? "", ids);
  }
}
