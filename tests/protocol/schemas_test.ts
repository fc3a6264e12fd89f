/**
 * protocol/schemas.ts against protocol/wire.ts: every schema's derived type is exactly its wire
 * type (checked by the compiler: a disagreement fails `deno check` and this file), and the name
 * and duration patterns accept and refuse what the broker's own checks do.
 */

import type { FromSchema, Same } from "../../protocol/schema_type.ts";
import { DURATION_PATTERN, NAME_PATTERN, SCHEMAS } from "../../protocol/schemas.ts";
import type * as W from "../../protocol/wire.ts";
import type { ErrorCode } from "../../protocol/error_codes.ts";
import { readDuration } from "../../protocol/duration.ts";
import { checkName } from "../../lib/names.ts";
import { assertEquals } from "../_support/assert.ts";

type D = typeof SCHEMAS;
type Of<N extends keyof D> = FromSchema<D[N], D>;

/** Each wire type and the schema that describes it; a `false` here is a compile error. */
const SAME: Record<string, true> = {
  Priority: true satisfies Same<Of<"Priority">, W.Priority> as true,
  ErrorCode: true satisfies Same<Of<"ErrorCode">, ErrorCode> as true,
  Message: true satisfies Same<Of<"Message">, W.MessageJson> as true,
  PublishAnswer: true satisfies Same<Of<"PublishAnswer">, W.PublishAnswer> as true,
  BatchPublishAnswer: true satisfies Same<Of<"BatchPublishAnswer">, W.BatchPublishAnswer> as true,
  BroadcastAnswer: true satisfies Same<Of<"BroadcastAnswer">, W.BroadcastAnswer> as true,
  BatchAckAnswer: true satisfies Same<Of<"BatchAckAnswer">, W.BatchAckAnswer> as true,
  RequeueAnswer: true satisfies Same<Of<"RequeueAnswer">, W.RequeueAnswer> as true,
  TouchAnswer: true satisfies Same<Of<"TouchAnswer">, W.TouchAnswer> as true,
  BatchTouchAnswer: true satisfies Same<Of<"BatchTouchAnswer">, W.BatchTouchAnswer> as true,
  Topic: true satisfies Same<Of<"Topic">, W.TopicJson> as true,
  Group: true satisfies Same<Of<"Group">, W.GroupJson> as true,
  QueueItem: true satisfies Same<Of<"QueueItem">, W.QueueItem> as true,
  RedriveAnswer: true satisfies Same<Of<"RedriveAnswer">, W.RedriveAnswer> as true,
  InFlightItem: true satisfies Same<Of<"InFlightItem">, W.InFlightItem> as true,
  ReleaseAnswer: true satisfies Same<Of<"ReleaseAnswer">, W.ReleaseAnswer> as true,
  RatePoint: true satisfies Same<Of<"RatePoint">, W.RatePointJson> as true,
  Rates: true satisfies Same<Of<"Rates">, W.RatesJson> as true,
  PurgeAnswer: true satisfies Same<Of<"PurgeAnswer">, W.PurgeAnswer> as true,
  DeleteAnswer: true satisfies Same<Of<"DeleteAnswer">, W.DeleteAnswer> as true,
  GroupStats: true satisfies Same<Of<"GroupStats">, W.GroupStats> as true,
  Stats: true satisfies Same<Of<"Stats">, W.StatsJson> as true,
  Health: true satisfies Same<Of<"Health">, W.HealthJson> as true,
  ClusterPeer: true satisfies Same<Of<"ClusterPeer">, W.ClusterPeer> as true,
  ClusterStatus: true satisfies Same<Of<"ClusterStatus">, W.ClusterStatus> as true,
  Problem: true satisfies Same<Of<"Problem">, W.Problem> as true,
  Webhook: true satisfies Same<Of<"Webhook">, W.WebhookJson> as true,
  WebhookItem: true satisfies Same<Of<"WebhookItem">, W.WebhookItem> as true,
  WebhookAttempt: true satisfies Same<Of<"WebhookAttempt">, W.WebhookAttempt> as true,
  WebhookDeleted: true satisfies Same<Of<"WebhookDeleted">, W.WebhookDeleted> as true,
  DrainAnswer: true satisfies Same<Of<"DrainAnswer">, W.DrainAnswer> as true,
  WsClientFrame: true satisfies Same<Of<"WsClientFrame">, W.WsClientFrame> as true,
  WsServerFrame: true satisfies Same<Of<"WsServerFrame">, W.WsServerFrame> as true,
};

Deno.test("SCHEMAS: every schema is checked against its wire.ts type", () => {
  assertEquals(Object.keys(SAME).sort(), Object.keys(SCHEMAS).sort());
});

Deno.test("NAME_PATTERN accepts and refuses the names lib/names.ts does", () => {
  const re = new RegExp(NAME_PATTERN, "u");
  const names = [
    "orders",
    "a",
    "A-Z_0.9",
    "-x",
    "_x",
    ".hidden",
    "a..b",
    "a.",
    "x".repeat(200),
    "x".repeat(201),
    "",
    "sp ace",
    "ü",
    "a/b",
    "orders.dlq",
  ];
  for (const name of names) {
    let ok = true;
    try {
      checkName(name, "group");
    } catch {
      ok = false;
    }
    assertEquals(re.test(name), ok, `name ${JSON.stringify(name)}`);
  }
});

Deno.test("DURATION_PATTERN accepts and refuses the durations protocol/duration.ts does", () => {
  const re = new RegExp(DURATION_PATTERN, "u");
  for (const d of ["0s", "250ms", "30s", "5m", "1h", "1d", "s", "1.5s", "-1s", "30 s", "1S", ""]) {
    assertEquals(re.test(d), readDuration(d) !== undefined, `duration ${JSON.stringify(d)}`);
  }
});
