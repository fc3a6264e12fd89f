/**
 * @module What a node does as its role changes: while it leads, its writes ship through the
 * replicator and its webhooks are pushed; otherwise neither. And the snapshot a leader sends a
 * follower that catches up.
 */

import type { Topic } from "../topic.ts";
import type { Pushers } from "../push/webhook_pusher.ts";
import type { Replicator } from "./replicator.ts";
import type { ClusterState } from "./state.ts";
import type { Entry } from "./replica_stream.ts";

/** The parts of the broker a change of role touches. */
export interface LeadershipHost {
  eachTopic(): Iterable<Topic>;
  readonly pushers: Pushers | undefined;
  now(): number;
}

/** Starts or stops leading with `state`'s role, now and on every change. */
export function followLeadership(
  host: LeadershipHost,
  state: ClusterState,
  replicator: Replicator,
): void {
  let leading: boolean | undefined;
  const changed = () => {
    const now = state.role === "leader";
    if (now === leading) return;
    leading = now;
    if (now) {
      replicator.activate(() => snapshotEntries(host.eachTopic(), host.now()), state.term);
      for (const t of host.eachTopic()) host.pushers?.sync(t);
    } else {
      replicator.deactivate("this node no longer leads");
      for (const t of host.eachTopic()) host.pushers?.forget(t);
    }
  };
  state.onChange(changed);
  changed();
}

/** Every topic as stream entries, for a follower that catches up. */
function snapshotEntries(topics: Iterable<Topic>, now: number): Entry[] {
  const out: Entry[] = [];
  for (const t of topics) {
    for (const frame of t.replicaFrames(now)) out.push({ kind: "record", topic: t.name, frame });
  }
  return out;
}
