/**
 * @module Pushing a topic's messages to its webhooks. Each webhook's pusher is a consumer with
 * BROKER_WEBHOOK_CONCURRENCY credits on the webhook's own group, fed by the one delivery
 * pipeline: a POST in flight holds a lease (60 s, past the 15 s a POST may take). Any 2xx acks;
 * 410 removes the webhook; anything else (or a timeout, a refused connection) requeues the
 * message with the next wait of BROKER_WEBHOOK_RETRY_SCHEDULE (±10 %), and when the schedule is
 * used up moves it to `{topic}.dlq` with the last status or error as its reason. Each finished
 * POST gives its credit back, so a slow or dead endpoint holds only its own credits.
 */

import type { Offered } from "../delivery/consumers.ts";
import type { BrokerContext } from "../context.ts";
import { deadLetter, dlqName } from "../delivery/dead_letter.ts";
import { ackIn } from "../delivery/deliveries.ts";
import type { Group } from "../delivery/group.ts";
import { type Delivery, State } from "../message.ts";
import { PushConsumer, type PushPipeline } from "./consumer.ts";
import { type Topic, webhookGroup } from "../topic.ts";
import { RecordType } from "../storage/record.ts";
import { hmacKey, signatures } from "./webhook_signature.ts";
import type { Webhook } from "./webhook_registry.ts";

/** How long a POST's message stays leased to its pusher; a POST gives up after 15 s. */
export const WEBHOOK_LEASE_MS = 60_000;
/** Attempts each webhook remembers for operators. */
export const ATTEMPTS_KEPT = 50;
/** Characters of an endpoint's answer kept with an attempt. */
const ANSWER_CHARS = 1024;
/** Failed POSTs in a row after which a webhook is paused and probed instead of hammered. */
export const PAUSE_AFTER_FAILURES = 5;
/** First wait before probing a paused webhook; it doubles after each failed probe. */
export const PROBE_FIRST_MS = 1_000;
/** Longest wait between probes. */
export const PROBE_MAX_MS = 5 * 60_000;

/**
 * What sending one POST gave: a status and the start of the answer (null: not kept, the target
 * is internal), a failure, or a refusal of the target by the egress policy (lib/push/egress.ts:
 * nothing was sent).
 */
export type SendResult =
  | { status: number; answer: string | null }
  | { error: string }
  | { refused: string };

/** Sends one POST (fetch with a 15 s timeout in production); never throws. */
export type WebhookSend = (
  url: string,
  init: { headers: Record<string, string>; body: Uint8Array },
) => Promise<SendResult>;

/** Why a webhook URL may not be registered (its host resolves to a refused address), if so. */
export type WebhookVet = (url: string) => Promise<string | undefined>;

/** One POST, for the attempts log. */
export interface Attempt {
  at: number;
  messageId: string;
  retryCount: number;
  status: number | null;
  latencyMs: number;
  /**
   * The first 1 KiB of the answer; null when none is kept: no answer came, or the target is
   * loopback or private (docs/api/webhooks.md, "List webhooks and their attempts").
   */
  answer: string | null;
  error: string | undefined;
  outcome: Outcome;
}

/** What came of a POST (the `outcome` label of ferry_webhook_deliveries_total). */
export type Outcome = "delivered" | "retried" | "dead_lettered" | "gone" | "broadcast";

/** What operators see of a webhook's delivery. */
export interface WebhookStatus {
  paused: boolean;
  /** Messages its group holds: ready, delayed or in flight. */
  pending: number;
  /** Its latest POST. */
  last: Attempt | undefined;
}

/** Settings the pushers read. */
export interface PushSettings {
  version: string;
  concurrency: number;
  retryScheduleMs: number[];
  /** Hears how long each POST took, in seconds (the latency histogram). */
  onPost?: (topic: string, seconds: number) => void;
}

/** One webhook's pusher: a push consumer whose limit is the concurrency, 0 while paused. */
class Pusher extends PushConsumer {
  readonly attempts: Attempt[] = [];
  stopped = false;
  /** Failed POSTs since the last success. */
  failures = 0;
  /** While paused: when the next probe (one POST) goes, and the wait after a failed one. */
  probeAt: number | undefined;
  probeWaitMs = PROBE_FIRST_MS;
  /** POSTs a due probe may still send: 1 from `probe()` until it is sent. */
  #probes = 0;
  readonly #key: Promise<CryptoKey> | undefined;

  constructor(
    readonly hook: Webhook,
    group: Group,
    private readonly owner: Pushers,
  ) {
    super(owner.consumers, hook.topic, group, WEBHOOK_LEASE_MS, () => owner.ctx.now());
    this.#key = this.#signingKey();
  }

  /**
   * The HMAC key of the webhook's secret: opened from its seal, or plain from a record written
   * before sealing. A secret this node cannot open fails each POST unsent (never unsigned).
   */
  #signingKey(): Promise<CryptoKey> | undefined {
    const { hook } = this;
    if (!hook.sealedSecret) return hook.secret ? hmacKey(hook.secret) : undefined;
    const key = this.owner.ctx.secrets.open(hook.sealedSecret, hook.id).then(hmacKey);
    key.catch((e) =>
      this.owner.ctx.log.error("webhook cannot be signed: its POSTs fail until this is fixed", {
        id: hook.id,
        topic: hook.topic.name,
        error: (e as Error).message,
      })
    );
    return key;
  }

  protected get limit(): number {
    return this.probeAt === undefined ? this.owner.settings.concurrency : this.held + this.#probes;
  }

  protected send(item: Offered, ephemeral: boolean): boolean {
    if (!ephemeral && this.#probes > 0) this.#probes--;
    void this.#attempt(item, ephemeral);
    return true;
  }

  protected override closed(): void {
    this.stopped = true;
  }

  /** Headers of one POST (docs/api/webhooks.md). */
  async #headers(item: Offered, body: Uint8Array): Promise<Record<string, string>> {
    const msg = item.msg;
    const h: Record<string, string> = {
      "content-type": "application/octet-stream",
      "user-agent": `ferry/${this.owner.settings.version}`,
      "x-ferry-message-id": msg.id,
      "x-ferry-topic": this.hook.topic.name,
      "x-ferry-timestamp": new Date(msg.timestamp).toISOString(),
      "x-ferry-retry-count": String(item.retryCount),
    };
    const stored = msg.headers ?? [];
    for (let i = 0; i < stored.length; i += 2) h[stored[i]!] = stored[i + 1]!;
    if (this.#key) {
      const at = Math.floor(this.owner.ctx.now() / 1000);
      const sig = await signatures(await this.#key, msg.id, at, body);
      h["x-ferry-signature"] = sig.ferry;
      h["webhook-id"] = msg.id;
      h["webhook-timestamp"] = String(at);
      h["webhook-signature"] = sig.standard;
    }
    return h;
  }

  async #attempt(item: Offered, ephemeral: boolean): Promise<void> {
    const d = item as Delivery;
    const lease = ephemeral ? 0 : d.lease;
    const body = item.msg.payloadToKeep; // held across the POST's awaits
    const t0 = performance.now();
    let result: SendResult;
    try {
      const headers = await this.#headers(item, body);
      result = await this.owner.send(this.hook.url, { headers, body });
    } catch (e) {
      result = { error: (e as Error).message }; // the secret cannot be read: nothing sent
    }
    const took = performance.now() - t0;
    const latencyMs = Math.round(took * 10) / 10;
    this.owner.settings.onPost?.(this.hook.topic.name, took / 1000);
    const status = "status" in result ? result.status : null;
    if (!ephemeral) this.settle(item.msg.id);
    const outcome = ephemeral ? "broadcast" : this.#settle(d, lease, result);
    this.attempts.unshift({
      at: this.owner.ctx.now(),
      messageId: item.msg.id,
      retryCount: item.retryCount,
      status,
      latencyMs,
      answer: "answer" in result ? result.answer?.slice(0, ANSWER_CHARS) ?? null : null,
      error: "error" in result
        ? result.error
        : "refused" in result
        ? `target refused: ${result.refused}`
        : undefined,
      outcome: outcome ?? "retried",
    });
    if (this.attempts.length > ATTEMPTS_KEPT) this.attempts.pop();
    if (outcome) this.owner.count(this.hook.topic.name, outcome);
  }

  /** Acks, retries or dead-letters what a POST was for; undefined when it is no longer ours. */
  #settle(d: Delivery, lease: number, result: SendResult): Outcome | undefined {
    const { ctx } = this.owner;
    const topic = this.hook.topic;
    const g = this.group;
    // Deleted, drained or removed meanwhile, or the lease ended: the message is not ours now.
    const ours = !this.stopped && ctx.findTopic(topic.name) === topic &&
      topic.groups.get(g.name) === g && d.state === State.InFlight && d.lease === lease;
    if (!ours) return undefined;
    const now = ctx.now();
    let outcome: Outcome;
    if ("status" in result && result.status >= 200 && result.status < 300) {
      ackIn(topic, g, [d.msg.id], now).durable.catch(() => {});
      outcome = "delivered";
      if (this.probeAt !== undefined) this.#resume(now);
      this.failures = 0;
    } else if ("status" in result && result.status === 410) {
      this.owner.gone(this.hook.id);
      return "gone";
    } else {
      // A refused target is dead-lettered at once: the policy refuses every retry alike.
      const refused = "refused" in result;
      const reason = "status" in result
        ? `HTTP ${result.status}`
        : "error" in result
        ? result.error
        : `webhook target refused: ${result.refused}`;
      outcome = this.#retry(topic, g, d, reason, now, refused);
      this.failures++;
      if (this.probeAt === Infinity) this.#pause(now, reason, true);
      else if (this.probeAt === undefined && this.failures >= PAUSE_AFTER_FAILURES) {
        this.#pause(now, reason, false);
      }
    }
    if (this.probeAt === undefined) this.serve(now);
    return outcome;
  }

  /** Stops sending but for one probe after a wait that doubles with each failed probe. */
  #pause(now: number, reason: string, probeFailed: boolean): void {
    if (probeFailed) this.probeWaitMs = Math.min(this.probeWaitMs * 2, PROBE_MAX_MS);
    else {
      this.owner.ctx.log.warn("webhook paused: its endpoint keeps failing", {
        id: this.hook.id,
        topic: this.hook.topic.name,
        failures: this.failures,
        reason,
      });
    }
    this.probeAt = now + this.probeWaitMs;
    this.owner.ctx.wake(this.probeAt);
  }

  /** A probe succeeded: full credits again. */
  #resume(now: number): void {
    this.owner.ctx.log.info("webhook resumed", { id: this.hook.id, topic: this.hook.topic.name });
    this.probeAt = undefined;
    this.probeWaitMs = PROBE_FIRST_MS;
    this.serve(now);
  }

  /** A paused webhook whose probe is due gets one credit: one POST. */
  probe(now: number): void {
    if (this.probeAt === undefined || now < this.probeAt || this.stopped) return;
    this.probeAt = Infinity; // until the probe's answer decides
    this.#probes = 1;
    this.serve(now);
  }

  /** Whether it is paused (probing only). */
  get paused(): boolean {
    return this.probeAt !== undefined;
  }

  #retry(
    topic: Topic,
    g: Group,
    d: Delivery,
    reason: string,
    now: number,
    final = false,
  ): Outcome {
    const retry = d.retryCount + 1;
    const schedule = this.owner.settings.retryScheduleMs;
    topic.counters.requeued++;
    if (final || retry > schedule.length) {
      const dlq = this.owner.ctx.getTopic(dlqName(topic.name));
      deadLetter(this.owner.ctx, topic, g, d, dlq, retry, reason, now).catch(() => {});
      return "dead_lettered";
    }
    const wait = schedule[retry - 1]!;
    const jittered = Math.round(wait * (0.9 + 0.2 * Math.random()));
    topic.commit({
      type: RecordType.Requeue,
      seq: topic.nextSeq(),
      group: g.name,
      id: d.msg.id,
      retryCount: retry,
      dueAt: now + jittered,
      reason,
    }, now).catch(() => {});
    return "retried";
  }
}

/** Every webhook's pusher. */
export class Pushers {
  readonly #byId = new Map<string, Pusher>();
  /** POSTs by topic and outcome since start-up, for ferry_webhook_deliveries_total. */
  readonly outcomes = new Map<string, Map<Outcome, number>>();

  constructor(
    readonly ctx: BrokerContext,
    readonly consumers: PushPipeline,
    readonly send: WebhookSend,
    readonly settings: PushSettings,
    /** Removes a webhook whose endpoint answered 410 Gone. */
    readonly gone: (id: string) => void,
  ) {}

  /** Starts a pusher for each webhook of `topic` without one, and stops those whose webhook went. */
  sync(topic: Topic): void {
    for (const [id, p] of this.#byId) {
      if (p.hook.topic === topic && !topic.webhooks.has(id)) this.#stop(p);
    }
    for (const spec of topic.webhooks.values()) {
      if (this.#byId.has(spec.id)) continue;
      const group = topic.groups.get(webhookGroup(spec.id));
      if (!group) continue;
      const p = new Pusher({ ...spec, topic }, group, this);
      this.#byId.set(spec.id, p);
      p.start(this.ctx.now());
    }
  }

  /** Stops the pushers of a topic being deleted (the consumers are released with it). */
  forget(topic: Topic): void {
    for (const p of this.#byId.values()) if (p.hook.topic === topic) this.#stop(p);
  }

  /** Probes the paused webhooks whose wait is over (from the broker's sweep). */
  tick(now: number): void {
    for (const p of this.#byId.values()) if (p.probeAt !== undefined) p.probe(now);
  }

  /** When the next paused webhook is due for its probe (Infinity: none is). */
  nextProbe(): number {
    let at = Infinity;
    for (const p of this.#byId.values()) {
      if (p.probeAt !== undefined && !p.stopped) at = Math.min(at, p.probeAt);
    }
    return at;
  }

  /** Whether a webhook is paused after failing again and again. */
  paused(id: string): boolean {
    return this.#byId.get(id)?.paused ?? false;
  }

  /** Recent attempts of a webhook, newest first. */
  attempts(id: string): Attempt[] {
    return this.#byId.get(id)?.attempts ?? [];
  }

  count(topic: string, outcome: Outcome): void {
    let m = this.outcomes.get(topic);
    if (!m) this.outcomes.set(topic, m = new Map());
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
  }

  #stop(p: Pusher): void {
    p.stopped = true;
    p.stop();
    this.#byId.delete(p.hook.id);
  }
}
