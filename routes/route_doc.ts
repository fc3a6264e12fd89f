/**
 * The documentation a route carries beside its handler (`Route.doc`), from which
 * routes/openapi.ts builds GET /openapi.json, and the parameter shapes routes share. Limits come
 * from lib/config.ts, so the document states the limits the handlers enforce.
 */

import { formatDuration } from "../protocol/duration.ts";
import type { ErrorCode } from "../protocol/error_codes.ts";
import { DURATION_PATTERN, NAME_PATTERN, type SchemaName, schemaRef } from "../protocol/schemas.ts";

/** A JSON Schema (2020-12), as OpenAPI 3.1 writes them. */
export type Schema = Record<string, unknown>;

/** The sections of the reference page, in order. */
export const TAGS = {
  Messages: "Publish, consume, ack, requeue and touch.",
  Streams: "Live views: server-sent events and the WebSocket.",
  Topics: "Topics, consumer groups, the DLQ: create, list, redrive, purge, delete.",
  Dashboard: "The JSON interface of the web dashboard, by `queue` name.",
  Webhooks: "Push delivery: register, list, delete, and the attempts log.",
  Operations: "Health, drain, statistics, rates, metrics and cluster status.",
  Reference: "This document and the page that renders it.",
} as const;
export type Tag = keyof typeof TAGS;

/** A query, header or path parameter (an OpenAPI Parameter object). */
export interface Param {
  name: string;
  in: "query" | "header" | "path";
  description: string;
  schema: Schema;
  required?: boolean;
  example?: unknown;
}

/** A request body: JSON (optionally named, for generated clients) or raw bytes. */
export type Body =
  | {
    kind: "json";
    schema: Schema;
    name?: string;
    required: boolean;
    description?: string;
    /** Other media types the body may be sent as, besides `application/json`. */
    also?: Record<string, { schema: Schema }>;
  }
  | { kind: "raw"; description: string; maxBytes: number };

/** One success answer. */
export interface Answer {
  description: string;
  /** A JSON body: a named schema or an inline one. */
  json?: SchemaName | Schema;
  /** Other bodies by media type. */
  content?: Record<string, { schema?: Schema; example?: unknown; [x: `x-${string}`]: unknown }>;
  headers?: Record<string, { description: string; schema: Schema }>;
}

/** What a route documents about itself. */
export interface RouteDoc {
  /** Unique, camelCase: generated clients name their methods after it. */
  operationId: string;
  summary: string;
  description?: string;
  tag: Tag;
  /** Query parameters and request headers; path parameters come from `path` or PATH_PARAMS. */
  params?: Param[];
  /** Path parameters that differ from PATH_PARAMS (by name). */
  path?: Record<string, Param>;
  body?: Body;
  /** Success answers by status. */
  ok: Record<number, Answer>;
  /**
   * The refusals this route's handler and the broker calls it makes can answer. The builder adds
   * those every route of its kind has: auth, drain, election, an unreadable URL or path
   * parameter, and what reading its body can refuse.
   */
  errors?: ErrorCode[];
  /** Extensions (`x-…`) copied onto the operation. */
  extensions?: Record<`x-${string}`, unknown>;
}

/** A topic name (`{topic}.dlq` included). */
export const TOPIC_NAME: Schema = {
  type: "string",
  minLength: 1,
  maxLength: 204,
  pattern: NAME_PATTERN.slice(0, -1) + "(\\.dlq)?$",
  description: "1–200 characters of `A-Z a-z 0-9 . _ -`, not starting with `.`, no `..`; " +
    "`{topic}.dlq` names a topic's dead-letter queue.",
  examples: ["orders"],
};

/** A consumer group name. */
export const GROUP_NAME: Schema = {
  type: "string",
  maxLength: 200,
  pattern: `^$|${NAME_PATTERN}`,
  description: "A consumer group; empty or absent is the default group.",
};

/** A duration schema: an integer and a unit, within [minMs, maxMs]. */
export function durationSchema(maxMs: number, minMs = 0): Schema {
  return {
    type: "string",
    pattern: DURATION_PATTERN,
    description: `An integer and a unit (\`ms\`, \`s\`, \`m\`, \`h\`), from ${
      formatDuration(minMs)
    } to ${formatDuration(maxMs)}.`,
    examples: ["30s"],
    "x-ferry-min-ms": minMs,
    "x-ferry-max-ms": maxMs,
  };
}

/** A query parameter. */
export function query(name: string, description: string, schema: Schema, required = false): Param {
  return { name, in: "query", description, schema, ...(required ? { required } : {}) };
}

/** A duration query parameter. */
export function durationQuery(name: string, description: string, maxMs: number, minMs = 0): Param {
  return query(name, description, durationSchema(maxMs, minMs));
}

/** A boolean query parameter (`true`/`false`/`1`/`0`). */
export function boolQuery(name: string, description: string, def = false): Param {
  return query(name, `${description} Also \`1\`/\`0\`.`, { type: "boolean", default: def });
}

/** An integer query parameter. */
export function intQuery(
  name: string,
  description: string,
  min: number,
  max: number,
  def: number,
): Param {
  return query(name, description, { type: "integer", minimum: min, maximum: max, default: def });
}

/** `?group=`, as consume, ack, touch and requeue read it. */
export const GROUP_QUERY = query("group", "The consumer group.", GROUP_NAME);

/** `?queue=`, as the dashboard and queue routes read it. */
export const QUEUE_QUERY = query("queue", "The topic (queue) name.", TOPIC_NAME, true);

/** Path parameters by name, unless a route's doc says otherwise. */
export const PATH_PARAMS: Record<string, Param> = {
  topic: {
    name: "topic",
    in: "path",
    required: true,
    description: "The topic.",
    schema: TOPIC_NAME,
  },
  name: { name: "name", in: "path", required: true, description: "The topic.", schema: TOPIC_NAME },
  id: {
    name: "id",
    in: "path",
    required: true,
    description: "A message id, as consume answered it.",
    schema: { type: "string", format: "uuid" },
  },
};

/** A JSON body of a named wire schema. */
export function jsonAnswer(description: string, name: SchemaName): Answer {
  return { description, json: name };
}

/** A JSON array of a named wire schema. */
export function listAnswer(description: string, name: SchemaName): Answer {
  return { description, json: { type: "array", items: schemaRef(name) } };
}
