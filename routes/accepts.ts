/**
 * What a route accepts besides its path: the query parameters and JSON body fields its `doc`
 * lists (so GET /openapi.json, built from the same docs, cannot say otherwise), and `api_key`
 * where auth reads it. Anything else is 400 `bad_request` naming it and what the route accepts:
 * a misspelt option (`?tll=5s`) must not pass silently. The router gathers the names once per
 * route; a request without a query string pays nothing.
 */

import { BrokerError } from "../lib/errors.ts";
import { closestName } from "../protocol/closest_name.ts";
import { describe, type Query } from "./http.ts";
import type { RouteDoc, Schema } from "./route_doc.ts";

/** The names one route accepts. */
export interface Accepts {
  /** `POST /publish/{topic}`: how a refusal names the route. */
  readonly route: string;
  readonly query: ReadonlySet<string>;
  /** The top-level fields of its JSON body (of each item, for an array); none without one. */
  readonly fields: ReadonlySet<string>;
}

/**
 * The names a route accepts, from its documentation; `queryKey` adds `api_key` (auth's
 * `takesQueryKey`: createHandler passes it, so this module needs neither auth nor the router).
 */
export function acceptsOf(
  route: { method: string; pattern: string; doc?: RouteDoc },
  queryKey: boolean,
): Accepts {
  const doc = route.doc;
  const query = new Set<string>();
  for (const p of doc?.params ?? []) if (p.in === "query") query.add(p.name);
  if (queryKey) query.add("api_key");
  const body = doc?.body?.kind === "json" ? doc.body.schema : undefined;
  const object = (body?.type === "array" ? body.items : body) as Schema | undefined;
  const fields = new Set(Object.keys((object?.properties ?? {}) as Schema));
  return { route: `${route.method} ${route.pattern.replace(/:(\w+)/g, "{$1}")}`, query, fields };
}

/** Refuses a query parameter the route does not accept (this parses the query). */
export function checkQuery(query: Query, accepts: Accepts): void {
  for (const name of query.names()) {
    if (!accepts.query.has(name)) throw unknownQuery(name, accepts);
  }
}

/**
 * Refuses a field of a JSON object the route's body does not have; `at` names the object when
 * it is one item of the body (`messages[3]`).
 */
export function checkFields(body: Record<string, unknown>, accepts: Accepts, at?: string): void {
  for (const name in body) {
    if (!accepts.fields.has(name)) throw unknownField(name, accepts, at);
  }
}

function unknownQuery(name: string, accepts: Accepts): BrokerError {
  const hint = name === "api_key"
    ? " (send the key as Authorization: Bearer <key> or X-API-Key: <key>; only GET " +
      "/stream/{topic} and GET /ws take it in the query)"
    : suggestion(name, accepts.query);
  return new BrokerError(
    "bad_request",
    `Unknown query parameter ${describe(name)} for ${accepts.route}${hint}${listed(accepts.query)}`,
  );
}

function unknownField(name: string, accepts: Accepts, at: string | undefined): BrokerError {
  const what = at === undefined
    ? `Unknown field ${describe(name)} in the JSON body of ${accepts.route}`
    : `${at}: unknown field ${describe(name)}`;
  return new BrokerError(
    "bad_request",
    `${what}${suggestion(name, accepts.fields)}${listed(accepts.fields)}`,
  );
}

function listed(names: ReadonlySet<string>): string {
  return names.size ? `; accepted: ${[...names].join(", ")}` : "; it takes none";
}

/** ` (did you mean "ttl"?)` when one accepted name is a typo away from `name`, else "". */
function suggestion(name: string, names: ReadonlySet<string>): string {
  const best = closestName(name, names);
  return best === undefined ? "" : ` (did you mean ${JSON.stringify(best)}?)`;
}
