/**
 * The JSON answers of the broker, shaped from lib's domain values (numbers, ms times, bytes):
 * snake_case fields, ISO times, durations as text. The one place a wire shape is written.
 */

import {
  type BrokerApi,
  type ClusterView,
  type GroupFigures,
  type GroupView,
  type Handed,
  type Leased,
  PRIORITIES,
  type Published,
  type RatePoint,
  type Requeued,
  type TopicFigures,
  type TopicView,
} from "../lib/api.ts";
import { isUtf8 } from "node:buffer";
import { formatDuration } from "../protocol/duration.ts";
import type {
  ClusterStatus,
  DiskJson,
  GroupJson,
  GroupStats,
  InFlightItem,
  MessageJson,
  PublishAnswer,
  QueueItem,
  RatePointJson,
  RequeueAnswer,
  StatsJson,
  TopicJson,
} from "../protocol/wire.ts";

const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

let cachedSecond = NaN;
let cachedPrefix = "";

/**
 * `new Date(ms).toISOString()`, about 10× cheaper: the `YYYY-MM-DDTHH:MM:SS` part is kept for
 * the last second seen, which most messages of one answer share.
 */
export function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    const full = new Date(ms).toISOString();
    if (full.length !== 24) return full; // years outside 0000-9999 have another shape
    cachedSecond = second;
    cachedPrefix = full.slice(0, 20);
  }
  const milli = ms - second * 1000;
  return cachedPrefix + (milli < 10 ? "00" : milli < 100 ? "0" : "") + milli + "Z";
}

/** The Message object of a message handed out (consume, peek, SSE, WebSocket, dashboard). */
export function messageJson(h: Handed): MessageJson {
  const msg = h.msg;
  const payload = msg.readPayload();
  const json: MessageJson = {
    id: msg.id,
    topic: h.topic,
    payload: payload.toBase64(),
    timestamp: isoTime(msg.timestamp),
    retry_count: h.retryCount,
    headers: headersObject(msg.headers),
    priority: PRIORITIES[msg.priority]!,
  };
  if (isUtf8(payload)) json.payload_text = textDecoder.decode(payload);
  if (msg.expiresAt) json.expires_at = isoTime(msg.expiresAt);
  if (h.group) json.group = h.group;
  if (h.reason) json.reason = h.reason;
  if (msg.redriveCount) json.redrive_count = msg.redriveCount;
  return json;
}

/**
 * `JSON.stringify(messageJson(h))`, written straight into one string: no object per message,
 * and no escaping scan over what cannot need escaping (the id, the Base64 payload, the times).
 * A consume of 100 messages builds its answer from these (tests/routes/wire_test.ts holds the
 * two equal).
 */
export function messageText(h: Handed): string {
  const msg = h.msg;
  const payload = msg.readPayload();
  let out = '{"id":"' + msg.id + '","topic":' + JSON.stringify(h.topic) + ',"payload":"' +
    payload.toBase64() + '","timestamp":"' + isoTime(msg.timestamp) + '","retry_count":' +
    h.retryCount + ',"headers":' + headersText(msg.headers) + ',"priority":"' +
    PRIORITIES[msg.priority]! + '"';
  if (isUtf8(payload)) out += ',"payload_text":' + JSON.stringify(textDecoder.decode(payload));
  if (msg.expiresAt) out += ',"expires_at":"' + isoTime(msg.expiresAt) + '"';
  if (h.group) out += ',"group":' + JSON.stringify(h.group);
  if (h.reason) out += ',"reason":' + JSON.stringify(h.reason);
  if (msg.redriveCount) out += ',"redrive_count":' + msg.redriveCount;
  return out + "}";
}

/** The text of a WebSocket `message` frame: JSON.stringify of WsServerFrame's message shape. */
export function messageFrameText(subscription: string, h: Handed): string {
  return '{"type":"message","subscription":' + JSON.stringify(subscription) + ',"message":' +
    messageText(h) + "}";
}

/** A JSON array of messages (a consume's answer when `limit` > 1). */
export function messagesText(hs: readonly Handed[]): string {
  let out = "[";
  for (let i = 0; i < hs.length; i++) out += (i ? "," : "") + messageText(hs[i]!);
  return out + "]";
}

/** `JSON.stringify(headersObject(headers))`; `{}` without a single X-MQ-* header. */
function headersText(headers: string[] | undefined): string {
  if (!headers) return "{}";
  return JSON.stringify(headersObject(headers));
}

/** The stored header list as an object. */
export function headersObject(headers: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  for (let i = 0; i < headers.length; i += 2) {
    // content-type is kept for webhooks; only X-MQ-* headers are shown
    if (headers[i]!.startsWith("x-mq-")) out[headers[i]!] = headers[i + 1]!;
  }
  return out;
}

/** A message in flight, with its lease end (GET /api/queues/inflight). */
export function inFlightJson(l: Leased): InFlightItem {
  return { ...messageJson(l), lease_ends_at: isoTime(l.leaseEndsAt) };
}

/** One interval's rates, events per second rounded to 0.01. */
export function rateJson(p: RatePoint): RatePointJson {
  const r = (n: number) => Math.round(n * 100) / 100;
  return {
    time: isoTime(p.at),
    published: r(p.published),
    delivered: r(p.delivered),
    acked: r(p.acked),
    requeued: r(p.requeued),
    dead_lettered: r(p.deadLettered),
    expired: r(p.expired),
  };
}

/**
 * The answer to a publish (docs/api/publish.md), typed against `PublishAnswer`: the shape
 * that publishedText and batchAnswerText write as text (tests/routes/wire_test.ts holds them equal).
 */
export function publishedJson(p: Published): PublishAnswer {
  const out: PublishAnswer = {
    id: p.id,
    topic: p.topic,
    timestamp: isoTime(p.timestamp),
    priority: PRIORITIES[p.priority]!,
    deduplicated: p.deduplicated,
  };
  if (p.visibleAt) out.visible_at = isoTime(p.visibleAt);
  if (p.expiresAt) out.expires_at = isoTime(p.expiresAt);
  return out;
}

/**
 * The answer to a publish, written as text: the same JSON as `JSON.stringify(publishedJson(p))`
 * (a test holds them equal) at a fraction of its cost, on the path every publish takes. Ids,
 * topic names and times need no escaping (UUIDs, names of `A-Z a-z 0-9 . _ -`, ISO times).
 */
export function publishedText(p: Published): string {
  let out = `{"id":"${p.id}","topic":"${p.topic}","timestamp":"${isoTime(p.timestamp)}",` +
    `"priority":"${PRIORITIES[p.priority]!}","deduplicated":${p.deduplicated}`;
  if (p.visibleAt) out += `,"visible_at":"${isoTime(p.visibleAt)}"`;
  if (p.expiresAt) out += `,"expires_at":"${isoTime(p.expiresAt)}"`;
  return out + "}";
}

/** The answer to a batch publish, `{"messages":[PublishAnswer, ...]}`, as text (publishedText). */
export function batchAnswerText(results: readonly Published[]): string {
  let out = '{"messages":[';
  for (let i = 0; i < results.length; i++) out += (i ? "," : "") + publishedText(results[i]!);
  return out + "]}";
}

/** The answer to POST /requeue. */
export function requeuedJson(id: string, topic: string, r: Requeued): RequeueAnswer {
  return {
    id,
    topic,
    retry_count: r.retryCount,
    status: r.deadLettered ? "dead_lettered" : "requeued",
    queue: r.topic,
  };
}

/** The topic resource of docs/api/topics-and-groups.md. */
export function topicJson(broker: BrokerApi, t: TopicView): TopicJson {
  const eff = broker.effective(t);
  return {
    name: t.name,
    policy: t.settings.policy,
    retain: t.settings.retainMs ? formatDuration(t.settings.retainMs) : null,
    visibility: formatDuration(eff.visibilityMs),
    max_messages: eff.maxMessages,
    max_bytes: t.settings.maxBytes || null,
    created_at: new Date(t.settings.createdAt).toISOString(),
  };
}

/** A named group. */
export function groupJson(topic: string, g: GroupView): GroupJson {
  return { topic, group: g.name, created_at: isoTime(g.createdAt) };
}

/** One item of GET /api/queues (docs/api/dashboard-json.md). */
export function queueJson(f: TopicFigures): QueueItem {
  const s = f.topic.settings;
  return {
    name: f.name,
    depth: f.ready,
    in_flight: f.inFlight,
    delayed: f.delayed,
    held: f.held,
    held_bytes: f.heldBytes,
    dlq_depth: f.dlqDepth,
    groups: f.groupNames,
    policy: s.policy,
    retain: s.retainMs ? formatDuration(s.retainMs) : null,
    oldest_age_seconds: f.oldestAgeSeconds,
  };
}

/** One group's figures in GET /api/stats. */
function groupStatsJson(g: GroupFigures): GroupStats {
  return {
    depth: g.ready,
    in_flight: g.inFlight,
    delayed: g.delayed,
    oldest_age_seconds: g.oldestAgeSeconds,
  };
}

/** GET /api/stats. */
export function statsJson(broker: BrokerApi, now: number): StatsJson {
  const t = broker.stats.totals;
  // fromEntries: a topic or group may be named `__proto__`.
  const topics = Object.fromEntries(
    broker.stats.figures(now).map((f) => [
      f.name,
      {
        ...groupStatsJson(f),
        held_bytes: f.heldBytes,
        groups: Object.fromEntries(f.listedGroups.map((g) => [g.name, groupStatsJson(g)])),
      },
    ]),
  );
  return {
    uptime_seconds: Math.floor((now - broker.startedAt) / 1000),
    totals: {
      published: t.published,
      delivered: t.delivered,
      acked: t.acked,
      requeued: t.requeued,
      dead_lettered: t.deadLettered,
      expired: t.expired,
    },
    memory: {
      held_bytes: broker.memory.held,
      budget_bytes: broker.memory.budget,
      drain_bytes_per_second: Math.round(broker.memory.drainRate),
    },
    ...(broker.disk ? { disk: diskJson(broker.disk) } : {}),
    topics,
  };
}

/** The disk alarm's figures (docs/operating.md, "Disk"). */
export function diskJson(d: NonNullable<BrokerApi["disk"]>): DiskJson {
  return {
    free_bytes: Number.isFinite(d.freeBytes) ? d.freeBytes : null,
    limit_bytes: d.limitBytes,
    alarm: d.alarm,
  };
}

/** GET /api/cluster/status of a cluster node (docs/api/dashboard-json.md). */
export function clusterStatusJson(view: ClusterView): ClusterStatus {
  const { state: c, lag, lagSeconds, synchronous } = view;
  return {
    mode: "cluster",
    node_id: c.id,
    role: c.role,
    term: c.term,
    leader: c.leader?.url ?? null,
    peers: c.peers.map((p) => ({
      id: p.id,
      address: p.url,
      role: c.roleOf(p),
      healthy: p.healthy,
      last_seen: isoTime(p.lastSeen),
      lag_records: lag?.get(p.id) ?? null,
      lag_seconds: lagSeconds?.get(p.id) ?? null,
      synchronous: synchronous.has(p.id),
    })),
  };
}

/** GET /api/cluster/status standalone: this node leads itself, at the address it was reached. */
export function standaloneStatusJson(nodeId: string, address: string | null): ClusterStatus {
  return {
    mode: "standalone",
    node_id: nodeId,
    role: "leader",
    term: 0,
    leader: address,
    peers: [],
  };
}
