/**
 * @module The hot verbs across workers (BROKER_WORKERS, docs/architecture.md "Workers"). A
 * publish, consume or ack for a topic another worker owns runs its route here (parsing,
 * checks, the answer's JSON) and only the broker call crosses: `remoteBroker` is this worker's
 * `BrokerApi` with those verbs sent to the owner, and `answerCall` runs them there. What crosses
 * is cloned data: a payload is copied out of its slab first (a view would take the slab along),
 * and a consumed message crosses as its fields and is rebuilt on this side.
 */

import type { BrokerApi } from "./api.ts";
import type { Broker } from "./broker.ts";
import type { ConsumeOptions, Handed } from "./delivery/deliveries.ts";
import { BrokerError, type ErrorCode } from "./errors.ts";
import { type MessageFields, StoredMessage } from "./message.ts";
import type { BatchItem } from "./publish_batch.ts";
import type { PublishOptions } from "./publish.ts";

/** How this worker calls a verb on another (net/worker_link.ts `WorkerLink.call`). */
export interface PeerCalls {
  call(verb: string, args: unknown[], signal?: AbortSignal): Promise<unknown>;
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
  };
}

/** The verbs another worker may call here. */
const VERBS = new Set([
  "publish",
  "publishBatch",
  "broadcast",
  "consume",
  "ack",
  "requeue",
  "touch",
]);

/** Runs a verb another worker called, on this worker's broker; its result as it crosses. */
export async function answerCall(
  broker: Broker,
  verb: string,
  args: unknown[],
  signal: AbortSignal,
): Promise<unknown> {
  if (!VERBS.has(verb)) throw new Error(`no verb "${verb}" crosses workers`);
  if (verb === "consume") {
    const [name, opts] = args as [string, ConsumeOptions];
    return await broker.consume(name, { ...opts, signal }, (messages) => messages.map(portable));
  }
  const fn = (broker as unknown as Record<string, (...a: unknown[]) => unknown>)[verb]!;
  return await fn.apply(broker, args);
}

/**
 * This worker's broker, but with the hot verbs sent to the worker `peer` reaches: what a route
 * gets for a topic that worker owns. Everything else is this worker's.
 */
export function remoteBroker(local: BrokerApi, peer: PeerCalls): BrokerApi {
  const verbs: Record<string, unknown> = remoteVerbs(peer);
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(local, {
    get(target, prop) {
      if (typeof prop === "string" && prop in verbs) return verbs[prop];
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      let b = bound.get(prop);
      if (!b) bound.set(prop, b = v.bind(target));
      return b;
    },
  });
}
