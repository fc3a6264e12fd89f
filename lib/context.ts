/**
 * @module What the broker's parts share. The modules behind the facade (publish, deliveries,
 * dead letters, the scheduler, recovery) take this instead of the Broker, so none of them
 * imports the facade and the facade can import them all.
 */

import type { Config } from "./config.ts";
import type { Group } from "./delivery/group.ts";
import type { Logger } from "./log.ts";
import type { MemoryBudget } from "./memory/budget.ts";
import type { SecretBox } from "./push/secret_box.ts";
import type { Topic } from "./topic.ts";

/** A topic's settings with the broker defaults filled in. */
export interface EffectiveSettings {
  visibilityMs: number;
  maxMessages: number;
}

/** The broker as its parts see it. */
export interface BrokerContext {
  readonly config: Config;
  readonly now: () => number;
  readonly log: Logger;
  /** What the broker's messages hold against BROKER_MAX_MEMORY. */
  readonly memory: MemoryBudget;
  /** Seals and opens webhook secrets (lib/push/secret_box.ts). */
  readonly secrets: SecretBox;
  /** The topic, or undefined. Never creates. */
  findTopic(name: string): Topic | undefined;
  /** The topic, created with default settings when missing. */
  getTopic(name: string): Topic;
  /** Every topic, in no particular order. */
  eachTopic(): Iterable<Topic>;
  /** The group of a topic, created (and recorded) when missing. */
  getGroup(topic: Topic, name: string): Group;
  /** A topic's settings with the broker defaults filled in. */
  effective(topic: Topic): EffectiveSettings;
  /** Hands what group `g` has ready to the consumers waiting on it. */
  deliver(topic: Topic, g: Group, now: number): void;
  /** Hands what every group of `topic` has ready to the consumers waiting on it. */
  deliverAll(topic: Topic, now: number): void;
  /** Asks for a sweep at `at` or earlier (a deadline the topics' heaps do not hold). */
  wake(at: number): void;
}
