/**
 * @module Consumer groups of a topic: created by POST /api/groups or by their first consume, each
 * with a GROUP record, receiving what is published from then on. The default group is "".
 */

import type { BrokerContext } from "../context.ts";
import { BrokerError } from "../errors.ts";
import type { Group } from "./group.ts";
import { checkName } from "../names.ts";
import { DEFAULT_GROUP, isWebhookGroup, type Topic } from "../topic.ts";
import { RecordType } from "../storage/record.ts";

/** The group of a topic, created (and recorded) when missing. */
export function getGroup(ctx: BrokerContext, topic: Topic, name: string): Group {
  let g = topic.groups.get(name);
  if (!g) {
    const now = ctx.now();
    topic.commit({ type: RecordType.Group, seq: topic.nextSeq(), name, createdAt: now }, now)
      .catch(() => {}); // a failed write marks the WAL failed; later writes report it
    g = topic.groups.get(name)!;
  }
  return g;
}

/** Creates a named group that receives messages published from now on; 409 if it exists. */
export async function createGroup(
  ctx: BrokerContext,
  name: string,
  group: string,
): Promise<Group> {
  checkName(name, "topic");
  checkName(group, "group");
  const topic = ctx.getTopic(name);
  if (topic.groups.has(group)) {
    throw new BrokerError(
      "already_exists",
      `Cannot create group "${group}" on "${name}": it already exists`,
    );
  }
  const g = getGroup(ctx, topic, group);
  await topic.wal.barrier();
  return g;
}

/** The named groups of a topic (not the default one, nor webhooks'); 404 when there is no such topic. */
export function listGroups(ctx: BrokerContext, name: string): Group[] {
  checkName(name, "topic");
  const topic = ctx.findTopic(name);
  if (!topic) {
    throw new BrokerError("not_found", `Cannot list groups of "${name}": no such topic`);
  }
  return [...topic.groups.values()].filter((g) =>
    g.name !== DEFAULT_GROUP && !isWebhookGroup(g.name)
  );
}
