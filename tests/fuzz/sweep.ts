/**
 * The fuzzer's systematic pass, run once before the random campaign so each class of input
 * reaches each route whatever the seed: odd Host values and methods on every route, JSON nested
 * ~3,000 and 20,000 deep in every body field, bad values in every query parameter, X-MQ-*
 * header counts and sizes around the limits on the routes that store them; then the scenarios
 * that once crashed the broker or lost a message, each run on purpose.
 */

import type { FuzzRequest, Generator } from "./generator.ts";
import { mqHeaderList } from "./inputs.ts";
import { specOf } from "./routes.ts";
import { BAD_DURATIONS, deepJson, LONG_TOPICS } from "./values.ts";

/** Host values that are not a valid authority ("@" once gave a 500). */
const SWEEP_HOSTS = ["@", "a b", "[", "x:99999"];
/** Methods besides a route's own. */
const SWEEP_METHODS = ["HEAD", "OPTIONS", "PUT", "PATCH", "TRACE", "FOO"];
/** Nesting depths and shapes (true: arrays) put in every JSON field. */
const DEEP: [number, boolean][] = [[3_000, true], [3_000, false], [20_000, true], [20_000, false]];
/** X-MQ-* header counts and sizes around the HTTP layer's header limit and the 16 KiB cap. */
const SWEEP_MQ: [number, number][] = [
  [95, 16],
  [99, 16],
  [100, 16],
  [101, 16],
  [140, 16],
  [1, 16_384],
  [2, 8_200],
];
/** Bad values tried in every query parameter (already URL-encoded). */
const SWEEP_QUERY = [
  "1e3s",
  "-1s",
  "999999999h",
  "%zz",
  encodeURIComponent("a".repeat(201)),
  "",
  "%E2%82",
  BAD_DURATIONS[3]!,
];

/** Scenarios run once each before the random ones, with the topic they run on: every long name
 * (whose `.dlq` name is over the limit) at its third lease end and third requeue, and HEAD. */
export function scenarioSweep(): [string, string | undefined][] {
  const topics = [...LONG_TOPICS, "fz-a"];
  return [
    ...topics.flatMap((t) => [["leaseEnds", t], ["requeueToDlq", t]] as [string, string][]),
    ["headIsSafe", undefined],
    ["headIsSafe", undefined],
    ["headIsSafe", undefined],
  ];
}

/** Every request of the systematic pass, built by `gen` (valid except the swept input). */
export function sweepRequests(gen: Generator): FuzzRequest[] {
  const out: FuzzRequest[] = [];
  const tagged = (req: FuzzRequest, tag: string) => (req.tags.push(`sweep:${tag}`), req);
  for (const route of gen.routes) {
    const spec = specOf(route);
    for (const host of SWEEP_HOSTS) {
      out.push(tagged({ ...gen.build(route, { badness: 0, plain: true }), host }, `host:${host}`));
    }
    for (const method of SWEEP_METHODS) {
      out.push(tagged({ ...gen.build(route, { badness: 0, plain: true }), method }, method));
    }
    for (const field of Object.keys(spec.json ?? {})) {
      for (const [depth, array] of DEEP) {
        const json = deepJson(gen.r, depth, array);
        const req = gen.build(route, { badness: 0, plain: true, field: [field, json] });
        out.push(tagged(req, `deep-${array ? "array" : "object"}-${depth}@${field}`));
      }
    }
    for (const [count, size] of spec.payload ? SWEEP_MQ : []) {
      const req = gen.build(route, { badness: 0, plain: true });
      const mq = mqHeaderList(count, size);
      req.headers.push(...mq.headers);
      out.push(tagged(req, mq.tag));
    }
    for (const key of Object.keys(spec.query ?? {})) {
      for (const value of SWEEP_QUERY) {
        const req = gen.build(route, { badness: 0, plain: true, query: [key, value] });
        out.push(tagged(req, `query:${key}`));
      }
    }
  }
  return out;
}
