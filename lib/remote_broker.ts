/**
 * @module The hot verbs across workers (BROKER_WORKERS, docs/architecture.md "Workers"). A
 * publish, consume or ack for a topic another worker owns runs its route here (parsing,
 * checks, the answer's JSON) and only the broker call crosses: `remoteBroker` is this worker's
 * `BrokerApi` with those verbs sent to the owner, and `answerCall` runs them there. What crosses
 * is cloned data: a payload is copied out of its slab first (a view would take the slab along),
 * and a consumed message crosses as its fields and is rebuilt on this side.
 */

import type { BrokerApi, MetricsSource } from "./api.ts";
import type { Broker, ReplicaHandle } from "./broker.ts";
import type { ReplicaLink } from "./cluster/replicator.ts";
import type { ConsumeOptions, Handed } from "./delivery/deliveries.ts";
import { BrokerError, type ErrorCode } from "./errors.ts";
import { type MessageFields, StoredMessage } from "./message.ts";
import type { BatchItem } from "./publish_batch.ts";
import type { PublishOptions } from "./publish.ts";
import {
  checkPattern,
  type Feed,
  type FeedEvent,
  type Listener,
  type SubscribeOptions,
  type Unsubscribe,
} from "./feed.ts";
import type { PushHandle, PushSink } from "./push/consumer.ts";
import { type Shard, shardOf } from "./shard.ts";

/** How this worker reaches another (net/worker_link.ts `WorkerLink`). */
export interface PeerCalls {
  call(verb: string, args: unknown[], signal?: AbortSignal): Promise<unknown>;
  /** A subscription id whose events (the other side's `emit`) go to `fn`. */
  listen(fn: (data: unknown) => void): number;
  unlisten(id: number): void;
  /** Sends an event to the other side's subscription. */
  emit(sub: number, data: unknown): void;
}

/** A handed message as it crosses. */
interface PortableHanded {
  topic: string;
  fields: MessageFields;
  retryCount: number;
  reason: string | undefined;
  group: string;
}

function portable(h: Handed): PortableHanded {
  return {
    topic: h.topic,
    fields: h.msg.fields(),
    retryCount: h.retryCount,
    reason: h.reason,
    group: h.group,
  };
}

function rebuilt(p: PortableHanded): Handed {
  const msg = new StoredMessage(p.fields, 0);
  return { topic: p.topic, msg, retryCount: p.retryCount, reason: p.reason, group: p.group };
}

/** A payload on its own buffer: a slab's view would clone the whole slab. */
function own(payload: Uint8Array): Uint8Array {
  return payload.byteOffset === 0 && payload.byteLength === payload.buffer.byteLength
    ? payload
    : payload.slice();
}

/** ConsumeOptions without the signal (which does not cross; an abort is sent instead). */
function plainConsume(o: ConsumeOptions): Omit<ConsumeOptions, "signal"> {
  return {
    group: o.group,
    limit: o.limit,
    timeoutMs: o.timeoutMs,
    autoAck: o.autoAck,
    peek: o.peek,
    filterKey: o.filterKey,
    filterVal: o.filterVal,
    visibilityMs: o.visibilityMs,
  };
}

/** The error a verb threw on the other worker, thrown again here. */
function thrownAgain(e: unknown): never {
  const err = e as { name?: string; message?: string; code?: string; retryAfterSeconds?: number };
  if (err.name === "BrokerError" && err.code) {
    throw new BrokerError(err.code as ErrorCode, err.message ?? "", err.retryAfterSeconds);
  }
  throw new Error(`another worker failed: ${err.message}`);
}

/** The verbs that cross, as this side calls them. */
function remoteVerbs(peer: PeerCalls) {
  const call = (verb: string, args: unknown[], signal?: AbortSignal) =>
    peer.call(verb, args, signal).catch(thrownAgain);
  return {
    pushConsumer: (name: string, group: string, sink: PushSink) =>
      remotePush(peer, name, group, sink),
    publish: (name: string, payload: Uint8Array, opts?: PublishOptions) =>
      call("publish", [name, own(payload), opts]),
    publishBatch: (name: string, items: readonly BatchItem[]) =>
      call("publishBatch", [name, items.map((i) => ({ ...i, payload: own(i.payload) }))]),
    broadcast: (name: string, payload: Uint8Array, opts?: PublishOptions) =>
      call("broadcast", [name, own(payload), opts]),
    // The owner reads the messages out before it acks any (an auto-ack); the answer's body is
    // then built here from the copies.
    consume: async <T>(
      name: string,
      opts: ConsumeOptions,
      handOver: (messages: Handed[]) => T = (m) => m as T,
    ) => {
      // Only a poll that may park watches the client (reading `signal` costs a watch).
      const signal = opts.timeoutMs ? opts.signal : undefined;
      const got = await call("consume", [name, plainConsume(opts)], signal);
      return handOver((got as PortableHanded[]).map(rebuilt));
    },
    ack: (name: string, group: string, ids: string[]) => call("ack", [name, group, ids]),
    requeue: (name: string, group: string, id: string, opts?: unknown) =>
      call("requeue", [name, group, id, opts]),
    touch: (name: string, group: string, id: string, byMs?: number) =>
      call("touch", [name, group, id, byMs]),
    touchMany: (name: string, group: string, ids: string[], byMs?: number) =>
      call("touchMany", [name, group, ids, byMs]),
  };
}

/** A feed event as it crosses: a message's fields instead of the message. */
type PortableEvent =
  | Exclude<FeedEvent, { kind: "message" | "broadcast" }>
  | { kind: "broadcast"; topic: string; fields: MessageFields }
  | {
    kind: "message";
    topic: string;
    seq: number;
    fields: MessageFields;
    retryCount: number;
    reason: string | undefined;
    origin: string | undefined;
  };

function portableEvent(e: FeedEvent): PortableEvent {
  if (e.kind === "message") {
    const { msg, ...rest } = e;
    return { ...rest, fields: msg.fields() };
  }
  if (e.kind === "broadcast") return { kind: "broadcast", topic: e.topic, fields: e.msg.fields() };
  return e;
}

function rebuiltEvent(p: PortableEvent): FeedEvent {
  if (p.kind === "message") {
    const { fields, ...rest } = p;
    return { ...rest, msg: new StoredMessage(fields, 0) };
  }
  if (p.kind === "broadcast") {
    return { kind: "broadcast", topic: p.topic, msg: new StoredMessage(p.fields, 0) };
  }
  return p;
}

/** What the owner sends a push consumer's other side. */
type PushEvent = { h: PortableHanded; ephemeral: boolean } | { closed: true };

/** The verbs that go to the worker owning their first argument, a topic. */
const ROUTED = [
  "publish",
  "publishBatch",
  "broadcast",
  "consume",
  "ack",
  "requeue",
  "touch",
  "touchMany",
  "pushConsumer",
] as const;

/** The verbs another worker may call here as they are (a push consumer is a subscription). */
const VERBS = new Set<string>(ROUTED.filter((v) => v !== "pushConsumer"));

/**
 * Answers what one other worker calls on this worker's broker: the hot verbs, and its push
 * consumers and feed subscriptions here, whose deliveries and events go back as `emit`s.
 */
export class Answerer {
  readonly #pushes = new Map<number, PushHandle>();
  readonly #feeds = new Map<number, () => void>();
  readonly #replicas = new Map<number, ReplicaHandle>();

  constructor(readonly broker: Broker, readonly peer: PeerCalls) {}

  async answer(verb: string, args: unknown[], signal: AbortSignal): Promise<unknown> {
    const { broker, peer } = this;
    switch (verb) {
      case "consume": {
        const [name, opts] = args as [string, ConsumeOptions];
        return await broker.consume(name, { ...opts, signal }, (ms) => ms.map(portable));
      }
      case "pushConsumer": {
        const [sub, name, group, limit] = args as [number, string, string, number];
        const sink: PushSink = {
          limit,
          send: (h, ephemeral) => {
            peer.emit(sub, { h: portable(h), ephemeral } satisfies PushEvent);
            return true; // the other side drops the consumer if its socket falls behind
          },
          closed: () => {
            this.#pushes.delete(sub);
            peer.emit(sub, { closed: true } satisfies PushEvent);
          },
        };
        this.#pushes.set(sub, broker.pushConsumer(name, group, sink));
        return undefined;
      }
      case "push": {
        const [sub, op, id] = args as [number, "start" | "stop" | "settle" | "serve", string?];
        const c = this.#pushes.get(sub);
        if (op === "start") c?.start(broker.now());
        else if (op === "serve") c?.serve(broker.now());
        else if (op === "settle") c?.settle(id!);
        else {
          c?.stop();
          this.#pushes.delete(sub);
        }
        return undefined;
      }
      case "replicaAttach": {
        const [sub, node, term] = args as [number, string, number];
        const handle = broker.attachReplica(broker.shard?.index ?? 0, node, term, {
          send: (msg) => peer.emit(sub, { msg } satisfies ReplicaEvent),
          bufferedAmount: 0, // the worker holding the socket watches its backlog
          close: (reason) => {
            this.#replicas.delete(sub);
            peer.emit(sub, { close: reason } satisfies ReplicaEvent);
          },
        });
        this.#replicas.set(sub, handle);
        return undefined;
      }
      case "replicaAck": {
        const [sub, index] = args as [number, number];
        this.#replicas.get(sub)?.ack(index);
        return undefined;
      }
      case "replicaDetach": {
        const [sub, reason] = args as [number, string];
        this.#replicas.get(sub)?.detach(reason);
        this.#replicas.delete(sub);
        return undefined;
      }
      case "feedSubscribe": {
        const [sub, pattern] = args as [number, string];
        const off = broker.feed.subscribe(pattern, (e) => peer.emit(sub, portableEvent(e)));
        this.#feeds.set(sub, off);
        return undefined;
      }
      case "feedUnsubscribe": {
        const [sub] = args as [number];
        this.#feeds.get(sub)?.();
        this.#feeds.delete(sub);
        return undefined;
      }
    }
    if (!VERBS.has(verb)) throw new Error(`no verb "${verb}" crosses workers`);
    const fn = (broker as unknown as Record<string, (...a: unknown[]) => unknown>)[verb]!;
    return await fn.apply(broker, args);
  }
}

/** A push consumer on another worker: its deliveries come back as events. */
function remotePush(peer: PeerCalls, name: string, group: string, sink: PushSink): PushHandle {
  const sub = peer.listen((data) => {
    const e = data as PushEvent;
    if ("closed" in e) {
      peer.unlisten(sub);
      sink.closed();
    } else sink.send(rebuilt(e.h), e.ephemeral); // a socket behind drops the consumer itself
  });
  const op = (...args: unknown[]) => void peer.call("push", [sub, ...args]).catch(() => {});
  const ready = peer.call("pushConsumer", [sub, name, group, sink.limit]).then(
    () => {},
    (e) => {
      peer.unlisten(sub);
      thrownAgain(e); // refused there as it would be here
    },
  );
  return {
    ready,
    start: () => op("start"),
    serve: () => op("serve"),
    settle: (id: string) => op("settle", id),
    stop: () => {
      op("stop");
      peer.unlisten(sub);
    },
  };
}

/** What a follower's stream relayed from its owner brings: a message, or the end. */
type ReplicaEvent = { msg: Uint8Array } | { close: string };

/**
 * A follower's socket attached to another worker's shard: the stream comes back as events to
 * send on `link`, acks and the end go there as calls. Rejects as the owner refused.
 */
async function remoteReplica(
  peer: PeerCalls,
  node: string,
  term: number,
  link: ReplicaLink,
): Promise<ReplicaHandle> {
  const sub = peer.listen((data) => {
    const e = data as ReplicaEvent;
    if ("close" in e) {
      peer.unlisten(sub);
      link.close(e.close);
    } else link.send(e.msg);
  });
  try {
    await peer.call("replicaAttach", [sub, node, term]);
  } catch (e) {
    peer.unlisten(sub);
    thrownAgain(e);
  }
  return {
    ack: (index) => void peer.call("replicaAck", [sub, index]).catch(() => {}),
    detach: (reason) => {
      peer.unlisten(sub);
      peer.call("replicaDetach", [sub, reason]).catch(() => {});
    },
  };
}

/**
 * The durable feed across workers: a subscription to one topic listens where the topic lives,
 * one to a pattern (`orders.*`, `*`) on every worker. Events from another worker arrive rebuilt,
 * and a promise the listener returns holds nothing there (only this worker's feed waits for it).
 */
export function fanInFeed(
  local: Feed,
  shard: Shard,
  peers: (PeerCalls | null)[],
): Pick<Feed, "subscribe"> {
  return {
    subscribe(pattern: string, fn: Listener, opts?: SubscribeOptions): Unsubscribe {
      // Here, whichever worker owns it: the peers' refusals are not waited for.
      checkPattern(pattern);
      const everywhere = pattern.endsWith("*");
      const owner = everywhere ? -1 : shardOf(pattern, shard.count);
      const offs: (() => void)[] = [];
      const listening: Promise<unknown>[] = [];
      if (everywhere || owner === shard.index) offs.push(local.subscribe(pattern, fn, opts));
      peers.forEach((peer, i) => {
        if (!peer || (!everywhere && i !== owner)) return;
        const sub = peer.listen((data) => void fn(rebuiltEvent(data as PortableEvent)));
        listening.push(peer.call("feedSubscribe", [sub, pattern]).catch(() => {}));
        offs.push(() => {
          peer.unlisten(sub);
          peer.call("feedUnsubscribe", [sub]).catch(() => {});
        });
      });
      // Whoever confirms the subscription to a client waits for `ready`: until then another
      // worker's message could pass before its feed listens.
      return Object.assign(() => {
        for (const off of offs) off();
      }, { ready: Promise.all(listening) });
    },
  };
}

/**
 * This worker's broker as routes see it when there are several: a verb for a topic another
 * worker owns is a call to that worker (`peers[i]`, null at this worker's own index), the feed
 * hears every worker, and everything else is this worker's.
 */
export function shardedBroker(
  local: Broker,
  shard: Shard,
  peers: (PeerCalls | null)[],
): BrokerApi & MetricsSource {
  const remote = peers.map((p) => p && remoteVerbs(p));
  const overrides = new Map<PropertyKey, unknown>();
  for (const verb of ROUTED) {
    const mine = (local[verb] as (...a: unknown[]) => unknown).bind(local);
    overrides.set(verb, (name: string, ...rest: unknown[]) => {
      const owner = shardOf(name, shard.count);
      if (owner === shard.index) return mine(name, ...rest);
      return (remote[owner]![verb] as (...a: unknown[]) => unknown)(name, ...rest);
    });
  }
  overrides.set(
    "attachReplica",
    (index: number, node: string, term: number, link: ReplicaLink) =>
      index === shard.index
        ? local.attachReplica(index, node, term, link)
        : remoteReplica(peers[index]!, node, term, link),
  );
  const fanIn = fanInFeed(local.feed, shard, peers);
  overrides.set(
    "feed",
    new Proxy(local.feed, {
      get: (t, p) => p === "subscribe" ? fanIn.subscribe : bindIfFunction(t, p),
    }),
  );
  const methods = new Map<PropertyKey, unknown>(); // bound once: routes read them per request
  return new Proxy(local, {
    get: (t, p) => {
      if (overrides.has(p)) return overrides.get(p);
      if (methods.has(p)) return methods.get(p);
      const v = bindIfFunction(t, p);
      if (typeof v === "function") methods.set(p, v);
      return v;
    },
  }) as unknown as BrokerApi & MetricsSource;
}

/** `target[prop]`, bound to `target` if it is a method (private fields need the real `this`). */
function bindIfFunction(target: object, prop: PropertyKey): unknown {
  const v = Reflect.get(target, prop, target);
  return typeof v === "function" ? v.bind(target) : v;
}
