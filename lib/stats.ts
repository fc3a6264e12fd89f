/**
 * @module The broker's figures, the one projection that /api/queues, /api/stats, /metrics and
 * the dashboard read: per topic and group, what is ready, in flight and delayed, how old the
 * oldest message is; counters since start-up (deleted topics' included); health.
 */

import { DLQ_SUFFIX } from "./config.ts";
import type { Group } from "./delivery/group.ts";
import {
  DEFAULT_GROUP,
  isWebhookGroup,
  type Topic,
  type TopicCounters,
  zeroCounters,
} from "./topic.ts";

/** One group's queue figures. */
export interface GroupFigures {
  name: string;
  ready: number;
  inFlight: number;
  delayed: number;
  oldestAgeSeconds: number;
}

/** One topic's figures: its default group's, and each group's. */
export interface TopicFigures extends GroupFigures {
  topic: Topic;
  /** Messages stored, whatever their state in any group. */
  held: number;
  heldBytes: number;
  /** Messages in `{topic}.dlq`. */
  dlqDepth: number;
  /**
   * A topic's groups, as /api/groups, /api/queues, /api/stats and `ferry` count them: its named
   * groups, not the default one (every topic has it), nor a webhook's own (its webhook lists it).
   */
  groupNames: string[];
  /** The default group ("") first, then the named groups: the groups /api/stats shows. */
  listedGroups: GroupFigures[];
  /** Every group, the default one ("") first, webhooks' included (for /metrics). */
  groups: GroupFigures[];
  counters: TopicCounters;
}

/** A group's figures at `now`. */
export function groupFigures(topic: Topic, g: Group, now: number): GroupFigures {
  return {
    name: g.name,
    ready: g.readyCount,
    inFlight: g.inFlightCount,
    delayed: g.delayedCount,
    oldestAgeSeconds: oldestAgeSeconds(topic, g, now),
  };
}

/** Adds `from` into `into`, counter by counter. */
export function addCounters(into: TopicCounters, from: TopicCounters): void {
  for (const k of Object.keys(into) as (keyof TopicCounters)[]) into[k] += from[k];
}

/** The broker's figures over its topics. */
export class Stats {
  /** Counters of the topics deleted since start-up, so `totals` keeps what they counted. */
  readonly #retired: TopicCounters = zeroCounters();

  constructor(
    private readonly topics: () => Iterable<Topic>,
    private readonly findTopic: (name: string) => Topic | undefined,
  ) {}

  /** Every topic's figures at `now`, by name. */
  figures(now: number): TopicFigures[] {
    const list = [...this.topics()].sort((a, b) => a.name < b.name ? -1 : 1);
    return list.map((t) => this.topicFigures(t, now));
  }

  /** One topic's figures at `now`. */
  topicFigures(t: Topic, now: number): TopicFigures {
    const groups = [...t.groups.values()].map((g) => groupFigures(t, g, now));
    const listedGroups = groups.filter((g) => !isWebhookGroup(g.name));
    return {
      ...groups[0]!,
      name: t.name,
      topic: t,
      held: t.messages.size,
      heldBytes: t.heldBytes,
      dlqDepth: this.findTopic(t.name + DLQ_SUFFIX)?.messages.size ?? 0,
      groupNames: listedGroups.map((g) => g.name).filter((n) => n !== DEFAULT_GROUP),
      listedGroups,
      groups,
      counters: t.counters,
    };
  }

  /** Keeps what a topic being deleted counted. */
  retire(topic: Topic): void {
    addCounters(this.#retired, topic.counters);
  }

  /** Totals over every topic since start-up, including deleted ones; summed when asked. */
  get totals(): TopicCounters {
    const sum = { ...this.#retired };
    for (const t of this.topics()) addCounters(sum, t.counters);
    return sum;
  }

  /** False once any WAL write has failed: the node must not be trusted with writes. */
  get healthy(): boolean {
    for (const t of this.topics()) if (t.wal.failed) return false;
    return true;
  }
}

/** Oldest message age, in seconds, of what a group of `topic` holds. */
export function oldestAgeSeconds(topic: Topic, g: Group, now: number): number {
  const ts = topic.oldestTimestamp(g);
  return ts === undefined ? 0 : Math.max(0, (now - ts) / 1000);
}
