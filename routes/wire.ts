/**
 * The JSON answers of the broker, shaped from lib's domain values (numbers, ms times, bytes):
 * snake_case fields, ISO times, durations as text. The one place a wire shape is written.
 */

import type { Broker, Published } from "../lib/broker.ts";
import { formatDuration } from "../lib/duration.ts";
import type { Group } from "../lib/group.ts";
import { isoTime, PRIORITIES } from "../lib/message.ts";
import type { GroupFigures, TopicFigures } from "../lib/stats.ts";
import type { Topic } from "../lib/topic.ts";

/** The answer to a publish (CONTRACT "Success answers"). */
export function publishedJson(p: Published) {
  const out: Record<string, unknown> = {
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

/** The topic resource of CONTRACT "Success answers". */
export function topicJson(broker: Broker, t: Topic) {
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
export function groupJson(topic: string, g: Group) {
  return { topic, group: g.name, created_at: isoTime(g.createdAt) };
}

/** One item of GET /api/queues (CONTRACT "Health, cluster, stats, metrics"). */
export function queueJson(f: TopicFigures) {
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
function groupStatsJson(g: GroupFigures) {
  return {
    depth: g.ready,
    in_flight: g.inFlight,
    delayed: g.delayed,
    oldest_age_seconds: g.oldestAgeSeconds,
  };
}

/** GET /api/stats. */
export function statsJson(broker: Broker, now: number) {
  const t = broker.stats.totals;
  // fromEntries: a topic or group may be named `__proto__`.
  const topics = Object.fromEntries(
    broker.stats.figures(now).map((f) => [
      f.name,
      {
        ...groupStatsJson(f),
        held_bytes: f.heldBytes,
        groups: Object.fromEntries(f.groups.map((g) => [g.name, groupStatsJson(g)])),
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
    topics,
  };
}
