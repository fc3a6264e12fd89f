/**
 * @module What routes/ may use of lib/, in one place (tests/imports_test.ts holds routes/ to this
 * module and a few leaf modules): the broker as `BrokerApi`, its verbs and read-only views; the
 * shapes those verbs take and give; the limits the wire names; and the pure helpers a transport
 * needs. Topics and groups reach routes as views, the feed as its `subscribe`, the cluster as
 * what its status and transport read. The delivery pipeline, the scheduler, the WAL and ungated
 * topic creation stay behind it.
 */

import type { Broker } from "./broker.ts";
import type { Group } from "./delivery/group.ts";
import type { Feed } from "./feed.ts";
import type { MemoryBudget } from "./memory/budget.ts";
import type { DiskAlarm } from "./storage/disk_alarm.ts";
import type { PushHandle, PushSink } from "./push/consumer.ts";
import type { ReplicaLink } from "./cluster/replicator.ts";
import type { ReplicaHandle } from "./broker.ts";
import type { Shard } from "./shard.ts";
import type { ClusterState } from "./cluster/state.ts";
import type { TopicOptions, TopicView } from "./topic.ts";
import type { PublishOptions } from "./publish.ts";

export type { TopicView };
/** What a batch touch did: the ids touched, those not in flight, and the leases' new end. */
export interface TouchedMany {
  touched: string[];
  notFound: string[];
  until: number;
  /** The lease given, from now: `byMs`, or the topic's visibility. */
  leaseMs: number;
}
/** A group as routes see it: its name and when it was created. */
export type GroupView = Pick<Group, "name" | "createdAt">;

/** The members of the broker routes call as they are. */
type Verbs =
  | "ack"
  | "clusterView"
  | "config"
  | "consume"
  | "deleteTopic"
  | "drain"
  | "drainingError"
  | "draining"
  | "effective"
  | "findWebhook"
  | "healthy"
  | "leased"
  | "listWebhooks"
  | "log"
  | "nodeId"
  | "now"
  | "onDrain"
  | "peek"
  | "publish"
  | "publishBatch"
  | "purge"
  | "rates"
  | "redrive"
  | "registerWebhook"
  | "release"
  | "removeWebhook"
  | "requeue"
  | "reserve"
  | "startedAt"
  | "stats"
  | "version"
  | "webhookAttempts"
  | "webhookStatus";

/** What routes/ may use of the broker: its verbs, and views where it would hand out its state. */
export interface BrokerApi extends Pick<Broker, Verbs> {
  findTopic(name: string): TopicView | undefined;
  eachTopic(): Iterable<TopicView>;
  createTopic(name: string, opts: TopicOptions): Promise<TopicView>;
  createGroup(name: string, group: string): Promise<GroupView>;
  listGroups(name: string): GroupView[];
  /** Delivers to the consumers there now, storing nothing; how many it reached. */
  broadcast(name: string, payload: Uint8Array, opts?: PublishOptions): number | Promise<number>;
  /** Extends an in-flight message's lease; when it now ends. */
  touch(name: string, group: string, id: string, byMs?: number): number | Promise<number>;
  /** Extends the leases of many in-flight messages; ids not in flight are listed, not thrown. */
  touchMany(
    name: string,
    group: string,
    ids: string[],
    byMs?: number,
  ): TouchedMany | Promise<TouchedMany>;
  /** A push consumer that sends to `sink` (a consuming WebSocket); `start()` joins it. */
  pushConsumer(name: string, group: string, sink: PushSink): PushHandle;
  /** The durable feed, to listen to (SSE, WebSocket spies). */
  readonly feed: Pick<Feed, "subscribe">;
  /** The memory budget's figures, for /api/stats. */
  readonly memory: Pick<MemoryBudget, "held" | "budget" | "drainRate">;
  /** The disk alarm's figures, for /healthz and /api/stats; undefined: no alarm. */
  readonly disk: Pick<DiskAlarm, "alarm" | "freeBytes" | "limitBytes"> | undefined;
  /** This node's role and term in its cluster; undefined when standalone. */
  readonly cluster:
    | Pick<ClusterState, "role" | "term" | "writable" | "route" | "assertLeads">
    | undefined;
  /**
   * GET /cluster/replicate: a follower's socket joins the stream of `shard` (the worker that
   * owns it answers, wherever the socket landed).
   */
  attachReplica(
    shard: number,
    node: string,
    term: number,
    link: ReplicaLink,
  ): ReplicaHandle | Promise<ReplicaHandle>;
  /** Which of the node's workers answers, and how many there are; undefined: one. */
  readonly shard: Shard | undefined;
}

/** What /metrics reads of the broker at scrape time: figures and counters, nothing it changes. */
export type MetricsSource = Pick<
  Broker,
  "memory" | "disk" | "feed" | "pushers" | "cluster" | "replicator" | "stats" | "now"
>;

export type {
  BatchItem,
  ClusterView,
  ConsumeOptions,
  Handed,
  Leased,
  Published,
  PublishOptions,
  Requeued,
} from "./broker.ts";
export type { PushHandle, PushSink } from "./push/consumer.ts";
export type { FeedEvent, Unsubscribe } from "./feed.ts";
export type { OpenStream, OpenStreams, Revoked } from "./open_streams.ts";
export type { GroupFigures, TopicFigures } from "./stats.ts";
export type { TopicCounters } from "./topic.ts";
export type { RatePoint } from "./rates.ts";
export type { Webhook } from "./push/webhook_registry.ts";
export type { ReplicaLink } from "./cluster/replicator.ts";
export type { ReplicaHandle } from "./broker.ts";
export type { ClusterState } from "./cluster/state.ts";

export { PRIORITIES } from "./message.ts";
export { RATE_INTERVAL_MS } from "./rates.ts";
export { MAX_WEBHOOK_URL_CHARS } from "./push/webhook_registry.ts";
export { autoKey } from "./idempotency.ts";
export { allocPayload, copyPayload } from "./memory/slab.ts";
export { feedDelivery, filterFn } from "./delivery/deliveries.ts";
export { shardOf } from "./shard.ts";
export { MAX_BUFFERED_BYTES } from "./cluster/replicator.ts";
