/**
 * `ferry.subscribe()`: one WebSocket to GET /ws holding any number of subscriptions, each a
 * pattern with its handler.
 *
 * - A **spy** (no `group`, no `prefetch`) hears every message stored in the topics its pattern
 *   matches; its handler's result is ignored (errors go to `onError`).
 * - A **consuming** subscription (`group` or `prefetch`) is leased each delivery; when the handler
 *   returns the client acks it, and when it throws the client requeues it with the error's message
 *   as `reason`. Up to `prefetch` handlers run at once. A settlement that can no longer go over
 *   the socket that delivered it (it closed meanwhile) goes over HTTP.
 * - **Reconnects** after any close it did not ask for, waiting 1 s, 2 s, 4 s … 32 s (reset once a
 *   subscription is confirmed), and subscribes everything again. Deliveries held by the old
 *   socket come back when their leases end; a spy misses what was stored while disconnected
 *   (WebSocket has no resume: read with `stream()` to resume). A close with 1001 (going away:
 *   the broker drains or restarts) is waited out quietly: neither it nor the failed connects
 *   until the socket subscribes again (RESTART_QUIET_ATTEMPTS of them) reach `onError`.
 * - The API key goes in `?api_key=`, since browsers cannot set headers on a WebSocket. Pings are
 *   answered by the platform's WebSocket.
 */

import type { RequeueAnswer, WsClientFrame, WsServerFrame } from "../../protocol/wire.ts";
import { reconnectDelay, RESTART_QUIET_ATTEMPTS } from "./backoff.ts";
import { FerryBadResponseError, FerryConnectionError, FerryError } from "./errors.ts";
import { SETTLING, type SettlingOption } from "./http.ts";
import type { GroupOptions, Message, RequeueOptions } from "./options.ts";

/** What handles a message of a subscription. */
export type Handler = (msg: Message) => unknown;

/** Options of one subscription. */
export interface SubscribeOptions {
  /** Consume as this group (default group: `""`); makes it a consuming subscription. */
  group?: string;
  /** Un-acked deliveries held at once (1–1000; broker default 10); makes it consuming. */
  prefetch?: number;
  /**
   * Hears handler errors, error frames and failed settlements; the first subscription's also
   * hears connection failures (default: a console warning).
   */
  onError?: (err: unknown, msg?: Message) => void;
}

/** The HTTP calls that settle a delivery whose socket is gone: `Ferry`'s. */
export interface SettleClient {
  ack(topic: string, id: string, opts: GroupOptions & SettlingOption): Promise<void>;
  requeue(msg: Message, opts: RequeueOptions & SettlingOption): Promise<RequeueAnswer>;
}

/** Where and how to connect. */
export interface SocketSettings {
  url: string;
  apiKey: string | undefined;
  WebSocket: typeof WebSocket | undefined;
  /** Called once by close(). */
  onClose?: () => void;
}

interface Entry extends SubscribeOptions {
  handler: Handler;
  consuming: boolean;
}

/** Error codes a refused `subscribe` frame answers with. */
const REFUSED = new Set(["bad_request", "invalid_name", "invalid_parameter", "already_exists"]);

/** A WebSocket with its subscriptions; reconnects until `close()`. */
export class Subscription {
  readonly #entries = new Map<string, Entry>();
  /** Patterns sent on the current socket and not confirmed yet, oldest first. */
  readonly #pending = new Set<string>();
  #waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  readonly #WebSocket: typeof WebSocket;
  #ws: WebSocket | undefined;
  #failures = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** The broker went away (close 1001): its absence is expected until a subscription is confirmed. */
  #restarting = false;
  #onError: SubscribeOptions["onError"];
  /** Handlers running, with the settle of their delivery. */
  readonly #running = new Set<Promise<unknown>>();

  /** Use `ferry.subscribe()`; the socket opens at once. */
  constructor(private readonly ferry: SettleClient, private readonly settings: SocketSettings) {
    const ws = settings.WebSocket ?? globalThis.WebSocket;
    if (typeof ws !== "function") {
      throw new TypeError(
        "No WebSocket in this runtime: pass one as new Ferry({ WebSocket }) " +
          "(Node 20: run with --experimental-websocket)",
      );
    }
    this.#WebSocket = ws;
  }

  /**
   * Resolves once every subscription is confirmed on the current socket; rejects when the
   * broker refuses one (a bad name, say), or the subscription is closed first.
   */
  get ready(): Promise<void> {
    if (this.#ws?.readyState === 1 && this.#pending.size === 0) return Promise.resolve();
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Adds a subscription on this socket; throws if `pattern` already has one. */
  subscribe(pattern: string, handler: Handler, opts: SubscribeOptions = {}): void {
    if (this.#closed) throw new Error("Cannot subscribe: this Subscription is closed");
    if (this.#entries.has(pattern)) {
      throw new Error(`Already subscribed to "${pattern}": unsubscribe first`);
    }
    this.#onError ??= opts.onError;
    const consuming = opts.group !== undefined || opts.prefetch !== undefined;
    this.#entries.set(pattern, { ...opts, handler, consuming });
    if (this.#ws?.readyState === 1) this.#sendSubscribe(this.#ws, pattern);
    else if (!this.#ws && this.#timer === undefined) this.#connect();
  }

  /** Ends the subscription of `pattern`; messages still arriving for it are dropped. */
  unsubscribe(pattern: string): void {
    if (!this.#entries.delete(pattern)) return;
    this.#pending.delete(pattern);
    this.#settleWaiters();
    if (this.#ws?.readyState === 1) this.#send(this.#ws, { type: "unsubscribe", topic: pattern });
  }

  /**
   * Closes the socket for good; resolves once it is closed and the handlers running have
   * returned (with their settle: over HTTP, since the socket is gone).
   */
  async close(): Promise<void> {
    if (!this.#closed) this.settings.onClose?.();
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#rejectWaiters(
      new FerryConnectionError({ detail: "The subscription was closed", action: "GET /ws" }),
    );
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws && ws.readyState !== 3) {
      await new Promise<void>((resolve) => {
        ws.addEventListener("close", () => resolve(), { once: true });
        ws.close(1000, "closed by the client");
      });
    }
    while (this.#running.size) await Promise.all(this.#running);
  }

  #connect(): void {
    this.#timer = undefined;
    if (this.#closed) return;
    const { url, apiKey } = this.settings;
    const target = url.replace(/^http/i, "ws") + "/ws" +
      (apiKey === undefined ? "" : `?api_key=${encodeURIComponent(apiKey)}`);
    let ws: WebSocket;
    try {
      ws = new this.#WebSocket(target);
    } catch (e) {
      this.#report(e);
      return this.#retry();
    }
    this.#ws = ws;
    this.#pending.clear();
    ws.addEventListener("open", () => {
      for (const pattern of this.#entries.keys()) this.#sendSubscribe(ws, pattern);
      this.#settleWaiters();
    });
    ws.addEventListener("message", (e) => this.#receive(ws, e.data));
    ws.addEventListener("close", (e) => {
      if (this.#ws !== ws) return;
      this.#ws = undefined;
      if (this.#closed) return;
      if (e.code === 1001) this.#restarting = true;
      if (!this.#restarting || this.#failures >= RESTART_QUIET_ATTEMPTS) {
        this.#report(
          new FerryConnectionError({
            detail: `The WebSocket closed (${e.code}${
              e.reason ? ` ${e.reason}` : ""
            }); reconnecting`,
            action: "GET /ws",
          }),
        );
      }
      this.#retry();
    });
  }

  #retry(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => this.#connect(), reconnectDelay(this.#failures++));
  }

  #receive(ws: WebSocket, data: unknown): void {
    let frame: WsServerFrame;
    try {
      frame = JSON.parse(String(data));
    } catch {
      return this.#report(
        new FerryBadResponseError({
          status: 0,
          detail: `Unreadable WebSocket frame: ${String(data).slice(0, 200)}`,
          action: "GET /ws",
        }),
      );
    }
    switch (frame.type) {
      case "subscribed":
        this.#failures = 0;
        this.#restarting = false;
        this.#pending.delete(frame.topic);
        return this.#settleWaiters();
      case "unsubscribed":
        return;
      case "message":
        return this.#deliver(ws, frame.subscription, frame.message);
      case "error": {
        const err = new FerryError({ status: 0, code: frame.code, detail: frame.detail });
        const [refused] = this.#pending;
        if (refused !== undefined && REFUSED.has(frame.code)) {
          const entry = this.#entries.get(refused);
          this.#entries.delete(refused);
          this.#pending.delete(refused);
          this.#rejectWaiters(err);
          return this.#report(err, undefined, entry);
        }
        return this.#report(err);
      }
    }
  }

  #deliver(ws: WebSocket, pattern: string, msg: Message): void {
    const entry = this.#entries.get(pattern);
    if (!entry) return; // unsubscribed: a leased delivery comes back when its lease ends
    const run = Promise.resolve().then(() => entry.handler(msg)).then(
      () => entry.consuming && this.#settle(ws, entry, msg),
      (e) => {
        this.#report(e, msg, entry);
        if (entry.consuming) {
          return this.#settle(ws, entry, msg, e instanceof Error ? e.message : String(e));
        }
      },
    ).finally(() => this.#running.delete(run));
    this.#running.add(run);
  }

  /** Acks (or with a reason requeues) a delivery, over its socket or else over HTTP. */
  #settle(ws: WebSocket, entry: Entry, msg: Message, reason?: string): Promise<void> | void {
    if (this.#ws === ws && ws.readyState === 1) {
      const frame: WsClientFrame = reason === undefined
        ? { type: "ack", topic: msg.topic, id: msg.id }
        : { type: "requeue", topic: msg.topic, id: msg.id, reason: reason.slice(0, 1024) };
      return this.#send(ws, frame);
    }
    const group = entry.group ?? "";
    const done = reason === undefined
      ? this.ferry.ack(msg.topic, msg.id, { group, [SETTLING]: true })
      : this.ferry.requeue(msg, { group, reason: reason.slice(0, 1024), [SETTLING]: true });
    return done.then(() => {}, (e) => this.#report(e, msg, entry));
  }

  #sendSubscribe(ws: WebSocket, pattern: string): void {
    const e = this.#entries.get(pattern)!;
    this.#pending.add(pattern);
    this.#send(
      ws,
      e.consuming
        ? { type: "subscribe", topic: pattern, group: e.group ?? "", prefetch: e.prefetch }
        : { type: "subscribe", topic: pattern },
    );
  }

  #send(ws: WebSocket, frame: WsClientFrame): void {
    try {
      ws.send(JSON.stringify(frame));
    } catch (e) {
      this.#report(e);
    }
  }

  #settleWaiters(): void {
    if (this.#pending.size || this.#ws?.readyState !== 1) return;
    for (const w of this.#waiters.splice(0)) w.resolve();
  }

  #rejectWaiters(e: unknown): void {
    for (const w of this.#waiters.splice(0)) w.reject(e);
  }

  #report(e: unknown, msg?: Message, entry?: Entry): void {
    const fn = entry?.onError ?? this.#onError;
    if (fn) fn(e, msg);
    else console.warn("ferry: subscribe:", e);
  }
}
