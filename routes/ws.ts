/**
 * GET /ws (docs/api/websocket.md): JSON text frames. A spy subscription (`subscribe` with a
 * pattern) sits on the durable feed and hears publishes, dead-letter moves, redrives and
 * broadcasts; a consuming subscription (`subscribe` with `group` or `prefetch`) is a push consumer
 * on one group, holding at most `prefetch` un-acked deliveries. Pings come from Deno's
 * `idleTimeout` (see `wsRoutes`); drain closes every socket with 1001.
 *
 * Deno assembles a client message of up to 64 MiB before the broker sees it, so what sockets can
 * make the broker hold is bounded by their number: BROKER_WS_MAX_SOCKETS in all and
 * BROKER_WS_MAX_SOCKETS_PER_KEY per API key (per client address with auth off), refused at the
 * upgrade; a frame over MAX_FRAME_BYTES closes its socket with 1009, and one socket holds at most
 * MAX_SUBSCRIPTIONS subscriptions. A key reload that revokes a socket's key (or its `consume`
 * scope) closes it with 1008 (lib/open_streams.ts).
 */

import {
  type BrokerApi,
  feedDelivery,
  type FeedEvent,
  type Handed,
  type OpenStreams,
  type PushHandle,
  type PushSink,
  type Unsubscribe,
} from "../lib/api.ts";
import { BrokerError } from "../lib/errors.ts";
import { checkName } from "../lib/names.ts";
import type { ErrorCode } from "../protocol/error_codes.ts";
import { hexOf } from "../protocol/key_hash.ts";
import type { WsServerFrame } from "../protocol/wire.ts";
import type { Ctx, Route } from "./router.ts";
import { messageFrameText as messageFrame } from "./wire.ts";
import { MAX_FRAME_BYTES, MAX_PREFETCH, parseFrame } from "./ws_frames.ts";
import type { RouteDoc } from "./route_doc.ts";
import { schemaRef } from "../protocol/schemas.ts";

/** How long a socket may be silent before the server pings it (docs/api/websocket.md: 25 s). */
export const PING_INTERVAL_MS = 25_000;
/** Bytes a socket may have waiting to be sent before a spy or broadcast drops its subscription. */
export const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
/** Un-acked deliveries a consuming subscription holds when the client names no `prefetch`. */
export const DEFAULT_PREFETCH = 10;
/**
 * Subscriptions (spies and consuming) one socket holds at most. Every publish walks the
 * `prefix*` spies of every socket (lib/feed.ts), so this and BROKER_WS_MAX_SOCKETS bound that
 * walk; a client that needs more topics spies on a pattern (`orders.*`, `*`).
 */
export const MAX_SUBSCRIPTIONS = 100;
/** Close code for a frame over MAX_FRAME_BYTES (RFC 6455: Message Too Big). */
const CLOSE_TOO_BIG = 1009;
/** Close code for a socket whose key was revoked (RFC 6455: Policy Violation). */
const CLOSE_REVOKED = 1008;
/** Longest requeue reason kept, as on POST /requeue. */
const MAX_REASON_CHARS = 1024;
const DRAINING = "The broker is draining";

/** Settings of the /ws route; tests shorten them. */
export interface WsOptions {
  /** Silence before a Ping (default PING_INTERVAL_MS). */
  pingMs?: number;
  /** Send-buffer bound (default MAX_BUFFERED_BYTES). */
  maxBufferedBytes?: number;
}

/**
 * The /ws route. Deno's `idleTimeout` (seconds) is set to twice `pingMs`: after `pingMs` without
 * any frame from the client (text, binary or Pong) Deno sends a Ping, and when still nothing has
 * come `pingMs` later it closes the socket with 1001 "No response from ping frame.". Every frame
 * received starts the wait again, so a client that answers is pinged every `pingMs`.
 */
/** The scope GET /ws needs; a socket whose key loses it is closed at the next key reload. */
const SCOPE = "consume";

export function wsRoutes(opts: WsOptions = {}): Route[] {
  const pingMs = opts.pingMs ?? PING_INTERVAL_MS;
  const maxBuffered = opts.maxBufferedBytes ?? MAX_BUFFERED_BYTES;
  const handler = (req: Request, ctx: Ctx) => upgrade(req, ctx, pingMs, maxBuffered);
  return [{ method: "GET", pattern: "/ws", scope: SCOPE, handler, doc: WS_DOC }];
}

const WS_DOC: RouteDoc = {
  operationId: "websocket",
  summary: "WebSocket: subscribe, consume, ack",
  description: "Upgrades to a WebSocket of JSON text frames with a `type` (`x-ferry-websocket` " +
    "holds their schemas: WsClientFrame, WsServerFrame; GET /asyncapi.json describes each). `subscribe` with a topic, `prefix*` or " +
    "`*` spies on what is stored; with `group` or `prefetch` " +
    `(1–${MAX_PREFETCH}, default ${DEFAULT_PREFETCH}) it consumes one topic, each delivery ` +
    "leased until acked or requeued. Errors are `error` frames and never close the socket, " +
    `but a frame over ${MAX_FRAME_BYTES / 1024} KiB closes it with 1009; a socket holds at most ` +
    `${MAX_SUBSCRIPTIONS} subscriptions. Past BROKER_WS_MAX_SOCKETS open sockets, or ` +
    "BROKER_WS_MAX_SOCKETS_PER_KEY for one key, the upgrade is answered 429 " +
    "`too_many_sockets`; revoking the key (SIGHUP) closes its sockets with 1008. " +
    "The server pings after " +
    `${PING_INTERVAL_MS / 1000} s of silence and closes with 1001 on drain. A plain GET answers ` +
    "400. Browsers pass the key as `?api_key=`.",
  tag: "Streams",
  ok: { 101: { description: "Switching Protocols: the socket is open." } },
  errors: ["too_many_sockets"],
  extensions: {
    "x-ferry-websocket": {
      client: schemaRef("WsClientFrame"),
      server: schemaRef("WsServerFrame"),
    },
  },
};

/** The open sockets of a broker, and how many each key (or client address) holds. */
interface Sockets {
  all: Set<Session>;
  held: Map<string, number>;
}

/** The open sockets of each broker, so that a drain heard by one closes them all. */
const SESSIONS = new WeakMap<BrokerApi, Sockets>();

/** The sockets of a broker, made on its first upgrade. */
function socketsOf(broker: BrokerApi): Sockets {
  let sockets = SESSIONS.get(broker);
  if (!sockets) {
    const made: Sockets = sockets = { all: new Set(), held: new Map() };
    SESSIONS.set(broker, made);
    // Sockets with no subscription hear the drain too.
    broker.onDrain(() => {
      for (const s of [...made.all]) s.close(1001, DRAINING);
    });
  }
  return sockets;
}

/**
 * Who a socket counts against: its API key (by digest), or with auth off the client's address.
 * Throws `too_many_sockets` when the broker or that holder has no socket left.
 */
function admitSocket(ctx: Ctx, sockets: Sockets): string {
  const { wsMaxSockets, wsMaxSocketsPerKey, workers } = ctx.broker.config;
  // Each worker holds its share of the total, so the broker's total holds whatever the spread.
  const share = Math.ceil(wsMaxSockets / Math.max(1, workers));
  if (sockets.all.size >= share) {
    const held = workers > 1
      ? `this worker holds ${share} open sockets, its share of ${wsMaxSockets} over ${workers} ` +
        "workers"
      : `the broker holds ${share} open sockets, the most it may`;
    throw new BrokerError(
      "too_many_sockets",
      `Cannot open a WebSocket: ${held} (BROKER_WS_MAX_SOCKETS); retry later, or raise ` +
        "BROKER_WS_MAX_SOCKETS",
    );
  }
  const caller = ctx.caller;
  const remote = caller ? undefined : ctx.remote?.();
  const holder = caller ? `key:${hexOf(caller.digest)}` : `addr:${remote ?? "unknown"}`;
  const held = sockets.held.get(holder) ?? 0;
  if (held >= wsMaxSocketsPerKey) {
    const who = caller
      ? `API key "${caller.name}" holds ${held} open socket${held === 1 ? "" : "s"}, the most ` +
        "one key may"
      : `client ${remote ?? "(address unknown)"} holds ${held} open ` +
        `socket${held === 1 ? "" : "s"}, the most one client address may with auth off`;
    throw new BrokerError(
      "too_many_sockets",
      `Cannot open a WebSocket: ${who} (BROKER_WS_MAX_SOCKETS_PER_KEY); close one, or raise ` +
        "BROKER_WS_MAX_SOCKETS_PER_KEY",
    );
  }
  return holder;
}

function upgrade(req: Request, ctx: Ctx, pingMs: number, maxBuffered: number): Response {
  if (!/\bwebsocket\b/i.test(req.headers.get("upgrade") ?? "")) {
    throw new BrokerError(
      "bad_request",
      "GET /ws is a WebSocket: connect with a WebSocket client (Upgrade: websocket)",
    );
  }
  const sockets = socketsOf(ctx.broker);
  const holder = admitSocket(ctx, sockets);
  let up: Deno.WebSocketUpgrade;
  try {
    up = Deno.upgradeWebSocket(req, { idleTimeout: (2 * pingMs) / 1000 });
  } catch (e) {
    throw new BrokerError("bad_request", `Cannot upgrade to a WebSocket: ${(e as Error).message}`);
  }
  const session = new Session(up.socket, ctx.broker, sockets, holder, ctx.requestId, maxBuffered);
  if (ctx.caller && ctx.streams) session.watchKey(ctx.streams, ctx.caller.digest);
  return up.response;
}

/** Spy frames by feed event and pattern: every socket on a pattern sends the same text. */
const SPY_FRAMES = new WeakMap<FeedEvent, Map<string, string>>();

/** A spy subscription: the function that unsubscribes it from the feed. */
interface Spy {
  off: Unsubscribe;
}

/** One socket: its subscriptions by pattern or topic, and what it sends. */
class Session {
  readonly #spies = new Map<string, Spy>();
  readonly #consuming = new Map<string, Consuming>();
  #ended = false;
  /** Forgets this socket in the open streams of its key (see watchKey). */
  #unwatch = () => {};

  constructor(
    readonly socket: WebSocket,
    readonly broker: BrokerApi,
    readonly sockets: Sockets,
    readonly holder: string,
    readonly requestId: string,
    readonly maxBuffered: number,
  ) {
    sockets.all.add(this);
    sockets.held.set(holder, (sockets.held.get(holder) ?? 0) + 1);
    socket.addEventListener("message", (e) => this.#receive(e.data));
    socket.addEventListener("close", () => this.#end());
  }

  /** Closes the socket with 1008 once a key reload revokes its key or its scope. */
  watchKey(streams: OpenStreams, digest: Uint8Array): void {
    this.#unwatch = streams.add({
      digest,
      scope: SCOPE,
      end: ({ code, detail }) => {
        this.error(code, `${detail}: this socket is closed; reconnect with a valid key`);
        this.close(CLOSE_REVOKED, detail);
      },
    });
  }

  send(frame: WsServerFrame): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(frame));
  }

  error(code: ErrorCode, detail: string): void {
    this.send({ type: "error", code, detail });
  }

  /**
   * Sends a message heard on `subscription`; false (and nothing sent) when `bounded` and more
   * than the bound already waits in the socket's send buffer.
   */
  /** Sends a spied message; its frame text is built once for every socket on the pattern. */
  #sendSpied(pattern: string, e: FeedEvent, h: Handed): boolean {
    if (this.socket.bufferedAmount > this.maxBuffered) return false;
    let byPattern = SPY_FRAMES.get(e);
    if (!byPattern) SPY_FRAMES.set(e, byPattern = new Map());
    let text = byPattern.get(pattern);
    if (text === undefined) byPattern.set(pattern, text = messageFrame(pattern, h));
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(text);
    return true;
  }

  deliver(subscription: string, h: Handed, bounded: boolean): boolean {
    if (bounded && this.socket.bufferedAmount > this.maxBuffered) return false;
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(messageFrame(subscription, h));
    return true;
  }

  /** Ends a consuming subscription that cannot keep up, and says why. */
  dropConsumer(c: Consuming, reason: string): void {
    if (this.#consuming.get(c.topic) !== c) return;
    c.stop();
    this.#consuming.delete(c.topic);
    this.error("unavailable", `Subscription "${c.topic}" dropped: ${reason}`);
  }

  /** A consumer removed by the broker: a drain, or its topic was deleted. */
  consumerClosed(c: Consuming): void {
    if (this.broker.draining) return this.#drained();
    if (this.#consuming.get(c.topic) !== c) return;
    this.#consuming.delete(c.topic);
    this.error("not_found", `Subscription "${c.topic}" ended: the topic was deleted`);
  }

  close(code: number, reason: string): void {
    this.#end();
    try {
      this.socket.close(code, reason);
    } catch { /* closing already */ }
  }

  async #receive(data: unknown): Promise<void> {
    if (this.#ended) return;
    if (this.broker.draining) return this.#drained();
    try {
      const f = parseFrame(data);
      switch (f.type) {
        case "subscribe":
          return f.group === undefined && f.prefetch === undefined
            ? await this.#spy(f.topic)
            : await this.#consume(f.topic, f.group ?? "", f.prefetch ?? DEFAULT_PREFETCH);
        case "unsubscribe":
          return this.#unsubscribe(f.topic);
        case "ack":
          return await this.#ack(f.topic, f.id);
        case "requeue":
          return await this.#requeue(f.topic, f.id, f.reason);
      }
    } catch (e) {
      if (e instanceof BrokerError && e.code === "payload_too_large") {
        // As a transport's maxPayload would: the client learns why, and the socket goes.
        this.error(e.code, `${e.message}: the socket is closed`);
        return this.close(CLOSE_TOO_BIG, "Frame too large");
      }
      if (e instanceof BrokerError) return this.error(e.code, e.message);
      this.broker.log.error("websocket frame failed", {
        request_id: this.requestId,
        error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
        stack: e instanceof Error ? e.stack : undefined,
      });
      this.error("internal", "Internal error; see the broker log");
    }
  }

  /** Throws `subscriptions_full` when the socket holds MAX_SUBSCRIPTIONS already. */
  #roomFor(topic: string): void {
    if (this.#spies.size + this.#consuming.size < MAX_SUBSCRIPTIONS) return;
    throw new BrokerError(
      "subscriptions_full",
      `Cannot subscribe to "${topic.slice(0, 64)}": this socket holds ${MAX_SUBSCRIPTIONS} ` +
        "subscriptions, the most one socket may; unsubscribe from one, subscribe to a " +
        "pattern (orders.*) instead, or open another socket",
    );
  }

  async #spy(pattern: string): Promise<void> {
    let spy = this.#spies.get(pattern);
    if (!spy) {
      this.#roomFor(pattern);
      const s: Spy = { off: () => {} };
      s.off = this.broker.feed.subscribe(pattern, (e) => this.#heard(pattern, s, e));
      this.#spies.set(pattern, spy = s);
    }
    // Confirmed once every worker's feed listens (at once with one worker).
    await spy.off.ready;
    this.send({ type: "subscribed", topic: pattern });
  }

  #heard(pattern: string, spy: Spy, e: FeedEvent): void {
    if (this.#spies.get(pattern) !== spy) return; // unsubscribed meanwhile
    switch (e.kind) {
      case "message":
      case "broadcast":
        break;
      case "gap":
        return; // only a resume (afterSeq) hears one, and sockets do not resume
      case "dropped":
        this.#spies.delete(pattern);
        return this.error("unavailable", `Subscription "${pattern}" dropped: ${e.reason}`);
      case "closed":
        return this.#drained();
    }
    if (!this.#sendSpied(pattern, e, feedDelivery(e))) {
      spy.off();
      this.#spies.delete(pattern);
      const waiting = this.socket.bufferedAmount;
      this.error(
        "unavailable",
        `Subscription "${pattern}" dropped: fell behind: ${waiting} bytes wait to be sent`,
      );
    }
  }

  async #consume(topic: string, group: string, prefetch: number): Promise<void> {
    if (topic.includes("*")) {
      throw new BrokerError(
        "invalid_parameter",
        `Cannot consume "${topic.slice(0, 64)}": consuming needs one topic, not a pattern`,
      );
    }
    checkName(topic, "topic");
    if (group) checkName(group, "group");
    const held = this.#consuming.get(topic);
    if (held) {
      if (held.group === group) return this.send({ type: "subscribed", topic });
      throw new BrokerError(
        "already_exists",
        `Already consuming "${topic}" as group "${held.group}" on this socket: ` +
          "unsubscribe first",
      );
    }
    this.#roomFor(topic);
    const c = new Consuming(this, topic, group, prefetch);
    this.#consuming.set(topic, c);
    try {
      await c.ready; // another worker's consumer exists there (at once with one worker)
    } catch (e) {
      if (this.#consuming.get(topic) === c) this.#consuming.delete(topic);
      throw e;
    }
    if (this.#consuming.get(topic) !== c) return; // unsubscribed meanwhile
    this.send({ type: "subscribed", topic });
    c.start(this.broker.now()); // hands over what is ready now
  }

  #unsubscribe(topic: string): void {
    this.#spies.get(topic)?.off();
    this.#spies.delete(topic);
    this.#consuming.get(topic)?.stop();
    this.#consuming.delete(topic);
    this.send({ type: "unsubscribed", topic });
  }

  #consumer(topic: string, action: string): Consuming {
    const c = this.#consuming.get(topic);
    if (!c) {
      throw new BrokerError(
        "not_found",
        `Cannot ${action} in "${topic.slice(0, 64)}": this socket does not consume it ` +
          "(subscribe with a group first)",
      );
    }
    return c;
  }

  async #ack(topic: string, id: string): Promise<void> {
    const c = this.#consumer(topic, "ack");
    c.settle(id);
    try {
      const { notFound } = await this.broker.ack(topic, c.group, [id]);
      if (notFound.length) {
        throw new BrokerError(
          "message_not_found",
          `Cannot ack message "${id.slice(0, 64)}" in ${where(topic, c.group)}: not found`,
        );
      }
    } finally {
      c.serve(this.broker.now());
    }
  }

  async #requeue(topic: string, id: string, reason: string | undefined): Promise<void> {
    const c = this.#consumer(topic, "requeue");
    c.settle(id); // before the requeue, which may hand the message straight back
    try {
      await this.broker.requeue(topic, c.group, id, {
        reason: reason ? reason.slice(0, MAX_REASON_CHARS) : undefined,
      });
    } finally {
      c.serve(this.broker.now());
    }
  }

  /** The broker drains: every socket of it closes with 1001 (going away). */
  #drained(): void {
    for (const s of [...this.sockets.all]) s.close(1001, DRAINING);
  }

  /** Unsubscribes everything; what its consumers hold comes back when the leases end. */
  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.sockets.all.delete(this);
    const held = (this.sockets.held.get(this.holder) ?? 1) - 1;
    if (held > 0) this.sockets.held.set(this.holder, held);
    else this.sockets.held.delete(this.holder);
    this.#unwatch();
    for (const spy of this.#spies.values()) spy.off();
    this.#spies.clear();
    for (const c of this.#consuming.values()) c.stop();
    this.#consuming.clear();
  }
}

function where(topic: string, group: string): string {
  return group ? `"${topic}" group "${group}"` : `"${topic}"`;
}

/**
 * A consuming subscription: the sink of a push consumer (lib/push/consumer.ts) on one group with
 * `prefetch` as its limit. A delivery the socket cannot take stops it: the socket is dropped as
 * fallen behind.
 */
class Consuming implements PushSink {
  readonly #consumer: PushHandle;

  constructor(
    private readonly session: Session,
    readonly topic: string,
    readonly group: string,
    readonly prefetch: number,
  ) {
    this.#consumer = session.broker.pushConsumer(topic, group, this);
  }

  get limit(): number {
    return this.prefetch;
  }

  /** Once the consumer exists where its topic lives (see PushHandle). */
  get ready(): Promise<void> | undefined {
    return this.#consumer.ready;
  }

  start(now: number): void {
    this.#consumer.start(now);
  }

  stop(): void {
    this.#consumer.stop();
  }

  settle(id: string): void {
    this.#consumer.settle(id);
  }

  serve(now: number): void {
    this.#consumer.serve(now);
  }

  send(h: Handed, ephemeral: boolean): boolean {
    const name = this.topic;
    try {
      // Leased deliveries are bounded by the credits; a broadcast like a spy's message.
      if (this.session.deliver(name, h, ephemeral)) return true;
      const why = `fell behind: ${this.session.socket.bufferedAmount} bytes wait to be sent`;
      // Not while the pipeline walks its list of consumers: after it.
      queueMicrotask(() => this.session.dropConsumer(this, why));
      return false;
    } catch (e) {
      // This runs inside a publish or a sweep: a delivery that cannot be sent waits for its lease.
      this.session.broker.log.error("websocket delivery failed", { topic: name, error: e });
      return true;
    }
  }

  closed(): void {
    this.session.consumerClosed(this);
  }
}
