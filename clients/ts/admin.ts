/**
 * The client's operator calls: topics, groups, dead letters, webhooks, and the health, stats,
 * cluster, metrics and drain endpoints. `Ferry` extends this class with the messaging calls.
 */

import type {
  ClusterStatus,
  DeleteAnswer,
  DrainAnswer,
  GroupJson,
  HealthJson,
  InFlightItem,
  PurgeAnswer,
  QueueItem,
  RatesJson,
  RedriveAnswer,
  ReleaseAnswer,
  StatsJson,
  TopicJson,
  WebhookAttempt,
  WebhookDeleted,
  WebhookItem,
  WebhookJson,
} from "../../protocol/wire.ts";
import { type Call, type Http, SETTLING, type SettlingOption } from "./http.ts";
import { type CallOptions, durationText, type Message, type TopicOptions } from "./options.ts";

/** A path segment, escaped. */
export const seg = encodeURIComponent;

/** Topics, groups, webhooks and operations; every method is one broker endpoint. */
export class FerryAdmin {
  /** @param http the transport every call goes through */
  constructor(protected readonly http: Http) {}

  /** Sends a call and resolves with its JSON answer. */
  protected async call<T>(call: Call, o: CallOptions & SettlingOption = {}): Promise<T> {
    const answer = await this.http.request({
      signal: o.signal,
      timeoutMs: o.timeoutMs,
      settling: o[SETTLING],
      ...call,
    });
    return answer.body as T;
  }

  /**
   * Creates a topic ahead of its first publish (POST /api/topics); 409 `already_exists` if it
   * exists. A `retention` of 0 or none sends no `retain` field, so messages get no default TTL.
   */
  createTopic(name: string, opts: TopicOptions = {}): Promise<TopicJson> {
    const json: Record<string, unknown> = { name, policy: opts.policy };
    const retain = opts.retention === undefined ? undefined : durationText(opts.retention);
    if (retain !== undefined && !/^0+(ms|s|m|h)$/.test(retain)) json.retain = retain;
    if (opts.visibility !== undefined) json.visibility = durationText(opts.visibility);
    if (opts.maxMessages !== undefined) json.max_messages = opts.maxMessages;
    if (opts.maxBytes !== undefined) json.max_bytes = opts.maxBytes;
    return this.call({ method: "POST", path: "/api/topics", json, idempotent: false }, opts);
  }

  /** Creates a named consumer group (POST /api/groups); 409 `already_exists` if it exists. */
  createGroup(topic: string, group: string, opts: CallOptions = {}): Promise<GroupJson> {
    const json = { topic, group };
    return this.call({ method: "POST", path: "/api/groups", json, idempotent: false }, opts);
  }

  /** The named groups of a topic (GET /api/groups). */
  groups(topic: string, opts: CallOptions = {}): Promise<GroupJson[]> {
    const query = { topic };
    return this.call({ method: "GET", path: "/api/groups", query, idempotent: true }, opts);
  }

  /** Every topic's settings, by name (GET /api/topics). */
  topics(opts: CallOptions = {}): Promise<TopicJson[]> {
    return this.call({ method: "GET", path: "/api/topics", idempotent: true }, opts);
  }

  /** One topic's settings (GET /api/topics/{name}); 404 `not_found` for an unknown topic. */
  topic(name: string, opts: CallOptions = {}): Promise<TopicJson> {
    return this.call(
      { method: "GET", path: `/api/topics/${seg(name)}`, idempotent: true },
      opts,
    );
  }

  /**
   * Up to `limit` (default 100, at most 1000) messages in flight in a group, each with its
   * `lease_ends_at`, the soonest first (GET /api/queues/inflight).
   */
  inFlight(
    topic: string,
    opts: CallOptions & { group?: string; limit?: number } = {},
  ): Promise<InFlightItem[]> {
    const query = { queue: topic, group: opts.group, limit: opts.limit };
    return this.call(
      { method: "GET", path: "/api/queues/inflight", query, idempotent: true },
      opts,
    );
  }

  /**
   * Ends the lease of an in-flight message now (POST /api/queues/release): it is ready again at
   * once and keeps its retry count. Unlike `requeue` this is not a failed attempt.
   */
  release(
    topic: string,
    id: string,
    opts: CallOptions & { group?: string } = {},
  ): Promise<ReleaseAnswer> {
    const json = { queue: topic, id, group: opts.group };
    return this.call(
      { method: "POST", path: "/api/queues/release", json, idempotent: true },
      opts,
    );
  }

  /**
   * Events per second over the last 5 minutes (GET /api/rates): the broker's `totals` and each
   * topic's latest point, or with `topic` that topic's history in `points`.
   */
  rates(opts: CallOptions & { topic?: string } = {}): Promise<RatesJson> {
    const query = { queue: opts.topic };
    return this.call({ method: "GET", path: "/api/rates", query, idempotent: true }, opts);
  }

  /** Every topic with its depth, in-flight, delayed and DLQ counts (GET /api/queues). */
  queues(opts: CallOptions = {}): Promise<QueueItem[]> {
    return this.call({ method: "GET", path: "/api/queues", idempotent: true }, opts);
  }

  /** Up to `limit` (at most 10, the default) ready messages, nothing taken (GET /api/queues/peek). */
  peek(topic: string, opts: CallOptions & { limit?: number } = {}): Promise<Message[]> {
    const query = { queue: topic, limit: opts.limit };
    return this.call({ method: "GET", path: "/api/queues/peek", query, idempotent: true }, opts);
  }

  /**
   * Moves every message of `{topic}.dlq` back to `topic` with `retry_count` 0, or only those
   * `ids` names (POST /api/queues/redrive). Not retried after a lost connection.
   */
  redrive(topic: string, opts: CallOptions & { ids?: string[] } = {}): Promise<RedriveAnswer> {
    const query = { queue: topic };
    return this.call({
      method: "POST",
      path: "/api/queues/redrive",
      query,
      json: opts.ids ? { ids: opts.ids } : undefined,
      idempotent: false,
    }, opts);
  }

  /** Removes every message of a topic (DELETE /api/queues/purge). */
  purge(topic: string, opts: CallOptions = {}): Promise<PurgeAnswer> {
    const query = { queue: topic };
    return this.call(
      { method: "DELETE", path: "/api/queues/purge", query, idempotent: true },
      opts,
    );
  }

  /** Deletes a topic and its WAL file (DELETE /api/queues/delete). */
  deleteTopic(topic: string, opts: CallOptions = {}): Promise<DeleteAnswer> {
    const query = { queue: topic };
    return this.call({
      method: "DELETE",
      path: "/api/queues/delete",
      query,
      idempotent: true,
    }, opts);
  }

  /**
   * Registers a webhook (POST /webhook/{topic}): Ferry POSTs each message of the topic to `url`,
   * signed when a `secret` is given. The answer says `signed`; the secret is never echoed.
   */
  addWebhook(
    topic: string,
    url: string,
    opts: CallOptions & { secret?: string } = {},
  ): Promise<WebhookJson> {
    const json = { url, secret: opts.secret };
    return this.call(
      { method: "POST", path: `/webhook/${seg(topic)}`, json, idempotent: false },
      opts,
    );
  }

  /** The webhooks, of one topic or all, with state and last attempt (GET /api/webhooks). */
  webhooks(topic?: string, opts: CallOptions = {}): Promise<WebhookItem[]> {
    const query = { topic };
    return this.call({ method: "GET", path: "/api/webhooks", query, idempotent: true }, opts);
  }

  /** Removes a webhook (DELETE /api/webhooks/{id}). */
  deleteWebhook(id: string, opts: CallOptions = {}): Promise<WebhookDeleted> {
    const path = `/api/webhooks/${seg(id)}`;
    return this.call({ method: "DELETE", path, idempotent: true }, opts);
  }

  /** A webhook's recent POSTs, newest first (GET /api/webhooks/{id}/attempts). */
  webhookAttempts(id: string, opts: CallOptions = {}): Promise<WebhookAttempt[]> {
    const path = `/api/webhooks/${seg(id)}/attempts`;
    return this.call({ method: "GET", path, idempotent: true }, opts);
  }

  /** Totals and per-topic figures (GET /api/stats). */
  stats(opts: CallOptions = {}): Promise<StatsJson> {
    return this.call({ method: "GET", path: "/api/stats", idempotent: true }, opts);
  }

  /**
   * The broker's health (GET /healthz). A draining, electing or failed broker answers 503 with a
   * body, which this returns as is (`status` says which) instead of throwing; not retried.
   */
  health(opts: CallOptions = {}): Promise<HealthJson> {
    return this.call(
      { method: "GET", path: "/healthz", idempotent: true, answers: [503], retry: false },
      opts,
    );
  }

  /** This node's role, term, leader and peers (GET /api/cluster/status). */
  clusterStatus(opts: CallOptions = {}): Promise<ClusterStatus> {
    return this.call({ method: "GET", path: "/api/cluster/status", idempotent: true }, opts);
  }

  /** The Prometheus exposition text (GET /metrics). */
  metrics(opts: CallOptions = {}): Promise<string> {
    return this.call({ method: "GET", path: "/metrics", idempotent: true, text: true }, opts);
  }

  /**
   * Puts the broker into draining (POST /api/drain): parked consumers are answered, and every
   * later request gets 503 `draining` until the process restarts. Not retried.
   */
  drain(opts: CallOptions = {}): Promise<DrainAnswer> {
    return this.call({ method: "POST", path: "/api/drain", idempotent: false, retry: false }, opts);
  }
}
