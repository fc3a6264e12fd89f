/**
 * The OpenAPI 3.1 document of a route table, built from each route's `doc`, the wire schemas of
 * protocol/schemas.ts and the request pipeline's own facts (which scope a route needs and how a
 * key is sent, which refusals auth, drain, elections and body reads add, which routes a follower
 * serves itself), so the document says what the code does. GET /openapi.json serves it.
 */

import { ERROR_CODES, type ErrorCode } from "../protocol/error_codes.ts";
import {
  NAME_PATTERN,
  SCHEMA_BASE,
  type SchemaName,
  schemaRef,
  SCHEMAS,
} from "../protocol/schemas.ts";
import { takesQueryKey } from "./auth.ts";
import { statusOf, titleOf } from "./http.ts";
import {
  type Answer,
  type Param,
  PATH_PARAMS,
  type RouteDoc,
  type Schema,
  TAGS,
} from "./route_doc.ts";
import type { Route } from "./router.ts";
import { OUTBOUND_WEBHOOK } from "./webhooks.ts";

type Json = Record<string, unknown>;

/** What each problem code means, for the answers' descriptions. */
const CODE_MEANING: Record<ErrorCode, string> = {
  bad_request: "the request cannot be read (URL, body, JSON, a missing field), or it has a " +
    "query parameter or JSON field the operation does not take",
  invalid_name: "a topic, group or queue name is missing or not valid",
  invalid_duration: "a duration is malformed or out of range",
  invalid_parameter: "a parameter or field has a wrong value",
  empty_body: "the body is empty",
  unauthorized: "no API key, or an unknown one (only when keys are configured)",
  forbidden: "the API key lacks the scope this operation needs",
  topic_limit_reached: "the broker holds BROKER_MAX_TOPICS topics already",
  subscriptions_full: "a WebSocket holds the most subscriptions one socket may",
  not_found: "the topic, queue, webhook or cluster link does not exist",
  queue_empty: "no message is available",
  message_not_found: "no message in flight has this id (in this group)",
  method_not_allowed: "the path does not take this method",
  already_exists: "it exists already",
  payload_too_large: "the body is larger than the limit",
  queue_full: "the topic holds its maximum of messages and its policy is `reject`",
  memory_full: "the broker holds BROKER_MAX_MEMORY of messages",
  rate_limited: "the API key publishes past its rate= or bytes= limit",
  too_many_sockets: "the broker holds BROKER_WS_MAX_SOCKETS open WebSockets, or the " +
    "API key (or client address) BROKER_WS_MAX_SOCKETS_PER_KEY",
  draining: "the broker is draining (after POST /api/drain or SIGTERM)",
  electing: "cluster mode: no leader is elected yet",
  unavailable: "the service cannot do it now",
  storage_failed: "the topic's log failed on disk; it changes no more until a restart",
  disk_full: "the data directory's free space is below BROKER_DISK_FREE_LIMIT: publishes wait",
  internal: "an unexpected error; logged with the request id, never shown",
};

/** The document's general description: what applies to every operation. */
const DESCRIPTION = `Ferry is an HTTP message broker: publish raw bytes to a topic, consume with
long-polling, ack, requeue, dead-letter and redrive; consumer groups, delays, TTLs, priorities,
idempotency keys, webhooks, server-sent events and a WebSocket.

**Errors** are RFC 9457 problem details (\`application/problem+json\`) with a stable \`code\`; each
operation lists the codes each status can carry. A path no route matches answers 404
\`not_found\`, and a method a path does not take answers 405 \`method_not_allowed\` with \`Allow\`.
Every answer carries \`X-Request-Id\` (the client's own value when it sent a sane one).

**Authentication** is off while \`BROKER_API_KEYS\` (or a keys file) is empty. When keys are set,
every operation but the public ones needs a key with the operation's scope (\`x-ferry-scope\`:
\`publish\`, \`consume\`, \`admin\` or \`metrics\`; \`admin\` includes \`metrics\`, and a key listed
without scopes has all four).

**Unknown names are refused**: a query parameter an operation does not list, or a JSON body
field its schema does not have, answers 400 \`bad_request\` naming it and those accepted.

**Durations** are an integer and a unit: \`250ms\`, \`30s\`, \`5m\`, \`1h\`.

**Cluster mode**: a follower answers what it does not serve itself with 307 to the leader, and
while no leader is known most operations answer 503 \`electing\`.`;

/** The routes without documentation: GET /openapi.json leaves them out, and a test fails. */
export function undocumented(routes: readonly Route[]): Route[] {
  return routes.filter((r) => !r.doc);
}

/** `/ack/:topic/:id` → `/ack/{topic}/{id}`. */
export function openApiPath(pattern: string): string {
  return pattern.replace(/:(\w+)/g, "{$1}");
}

/** The names of a pattern's parameters. */
export function pathParams(pattern: string): string[] {
  return [...pattern.matchAll(/:(\w+)/g)].map((m) => m[1]!);
}

/** Whether a schema (or one inside it) is a topic or group name, which the broker checks. */
function hasName(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasName);
  if (!v || typeof v !== "object") return false;
  return Object.entries(v).some(([k, x]) =>
    k === "pattern" && typeof x === "string" ? x.includes(NAME_PATTERN.slice(1, -1)) : hasName(x)
  );
}

/** The documentation of a path parameter: the route's own, or the shared one of that name. */
export function pathParamDoc(route: Route, name: string): Param | undefined {
  return route.doc?.path?.[name] ?? PATH_PARAMS[name];
}

/** Every problem code a route can answer: its own, and those its kind of route adds. */
export function problemCodes(route: Route): ErrorCode[] {
  const doc = route.doc;
  const codes = new Set<ErrorCode>(doc?.errors ?? []);
  codes.add("bad_request"); // an unreadable URL (a bad Host header)
  codes.add("internal");
  // A path parameter may be badly percent-encoded; a name anywhere may be missing or invalid.
  if (pathParams(route.pattern).length) codes.add("invalid_name");
  if (hasName(doc?.params) || (doc?.body?.kind === "json" && hasName(doc.body.schema))) {
    codes.add("invalid_name");
  }
  if (!route.whileDraining) codes.add("draining");
  if (route.cluster !== "always") codes.add("electing");
  if (route.scope !== "public") {
    codes.add("unauthorized");
    codes.add("forbidden");
  }
  const body = doc?.body;
  if (body) {
    codes.add("payload_too_large");
    if (body.kind === "raw" || body.required) codes.add("empty_body");
    if (body.kind === "json") codes.add("bad_request");
  }
  return ERROR_CODES.filter((c) => codes.has(c));
}

const REQUEST_ID_HEADER = { $ref: "#/components/headers/X-Request-Id" };

function jsonContent(schema: Schema | SchemaName, media = "application/json"): Json {
  return { [media]: { schema: typeof schema === "string" ? schemaRef(schema) : schema } };
}

function answer(a: Answer): Json {
  const content: Json = { ...(a.json ? jsonContent(a.json) : {}), ...(a.content ?? {}) };
  return {
    description: a.description,
    headers: { "X-Request-Id": REQUEST_ID_HEADER, ...(a.headers ?? {}) },
    ...(Object.keys(content).length ? { content } : {}),
  };
}

/** The problem answer of one status, its schema narrowed to the codes this route can send. */
function problemAnswer(status: number, codes: ErrorCode[]): Json {
  const headers: Json = { "X-Request-Id": REQUEST_ID_HEADER };
  if (status === 429 || status === 503) {
    headers["Retry-After"] = { $ref: "#/components/headers/Retry-After" };
  }
  if (status === 401) {
    headers["WWW-Authenticate"] = { $ref: "#/components/headers/WWW-Authenticate" };
  }
  return {
    description: `${titleOf(status)}. ${
      codes.map((c) => `\`${c}\`: ${CODE_MEANING[c]}`).join("; ")
    }.`,
    headers,
    content: jsonContent({
      type: "object",
      allOf: [schemaRef("Problem")],
      properties: { status: { const: status }, code: { enum: codes } },
    }, "application/problem+json"),
  };
}

const REDIRECT: Json = {
  description: "Cluster mode: this node follows; the same path and query on the leader.",
  headers: {
    Location: { description: "The leader's URL for this request.", schema: { type: "string" } },
    "X-Request-Id": REQUEST_ID_HEADER,
  },
};

/** The security requirement of a route: none when public, else any way to send a key. */
function security(route: Route): Json[] {
  if (route.scope === "public") return [];
  const scope = [route.scope];
  const ways: Json[] = [{ bearerAuth: scope }, { apiKeyHeader: scope }];
  if (takesQueryKey(route)) ways.push({ apiKeyQuery: scope });
  return ways;
}

/** The OpenAPI operation of one documented route; named request bodies go to `schemas`. */
function operation(route: Route, doc: RouteDoc, schemas: Json): Json {
  // An undocumented path parameter is a bare string here (the document must not fail to build)
  // and a failure in tests/routes/openapi_test.ts.
  const path = pathParams(route.pattern).map((name) => ({
    ...(pathParamDoc(route, name) ?? { name, description: "", schema: { type: "string" } }),
    in: "path",
    required: true,
  }));
  const responses: Json = {};
  for (const [status, a] of Object.entries(doc.ok)) responses[status] = answer(a);
  if (route.cluster !== "local" && route.cluster !== "always") responses["307"] = REDIRECT;
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of problemCodes(route)) {
    const s = statusOf(code);
    byStatus.set(s, [...byStatus.get(s) ?? [], code]);
  }
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const own = responses[status] as Json | undefined;
    // /healthz answers 503 with its own body, not a problem: keep the route's.
    if (!own) responses[status] = problemAnswer(status, codes);
  }
  const op: Json = {
    operationId: doc.operationId,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    ...(path.length || doc.params?.length ? { parameters: [...path, ...(doc.params ?? [])] } : {}),
    responses,
    security: security(route),
    "x-ferry-scope": route.scope,
    ...(doc.extensions ?? {}),
  };
  const body = doc.body;
  if (body?.kind === "json") {
    let schema: Schema = body.schema;
    if (body.name) {
      schemas[body.name] = body.schema;
      schema = { $ref: `${SCHEMA_BASE}${body.name}` };
    }
    op.requestBody = {
      required: body.required,
      ...(body.description ? { description: body.description } : {}),
      content: { ...jsonContent(schema), ...body.also },
    };
  } else if (body?.kind === "raw") {
    // JSON Schema counts characters, not bytes: the byte limit is an extension.
    op.requestBody = {
      required: true,
      description: body.description,
      content: {
        "text/plain": { schema: { type: "string", minLength: 1 } },
        "application/json": { schema: {} },
        "application/octet-stream": {
          schema: { type: "string", contentMediaType: "application/octet-stream" },
        },
      },
      "x-ferry-max-bytes": body.maxBytes,
    };
  }
  return op;
}

/** A GET that takes messages refuses HEAD (the router's `mutates`): documented as such. */
function refusedHead(doc: RouteDoc): Json {
  return {
    operationId: `${doc.operationId}Head`,
    summary: "HEAD is refused: this GET changes state",
    tags: [doc.tag],
    responses: { "405": problemAnswer(405, ["method_not_allowed"]) },
    security: [],
  };
}

/** The OpenAPI 3.1 document of `routes`, for a broker of `version`. */
export function openApiDocument(routes: readonly Route[], version: string): Json {
  const paths: Record<string, Json> = {};
  const schemas: Json = structuredClone(SCHEMAS) as unknown as Json;
  for (const route of routes) {
    if (!route.doc) continue;
    const item = paths[openApiPath(route.pattern)] ??= {};
    item[route.method.toLowerCase()] = operation(route, route.doc, schemas);
    if (route.mutates && route.method === "GET") item.head = refusedHead(route.doc);
  }
  return {
    openapi: "3.1.1",
    info: {
      title: "Ferry",
      version,
      summary: "An HTTP message broker",
      description: DESCRIPTION,
    },
    servers: [
      { url: "/", description: "The broker that served this document" },
      {
        url: "http://{host}:{port}",
        description: "A broker elsewhere",
        variables: { host: { default: "127.0.0.1" }, port: { default: "7800" } },
      },
    ],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    webhooks: { message: { post: OUTBOUND_WEBHOOK } },
    components: {
      schemas,
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description: "`Authorization: Bearer <key>`, a key of BROKER_API_KEYS.",
        },
        apiKeyHeader: { type: "apiKey", in: "header", name: "X-API-Key" },
        apiKeyQuery: {
          type: "apiKey",
          in: "query",
          name: "api_key",
          description: "Only on `/stream/{topic}` and `/ws`, where browsers cannot set headers.",
        },
      },
      headers: {
        "X-Request-Id": {
          description: "The request's id, also in the problem body and the broker's log.",
          schema: { type: "string" },
        },
        "Retry-After": {
          description: "Seconds to wait before a retry.",
          schema: { type: "integer", minimum: 0 },
        },
        "WWW-Authenticate": {
          description: 'Always `Bearer realm="ferry"`.',
          schema: { type: "string" },
        },
      },
      responses: {
        NoRoute: problemAnswer(404, ["not_found"]),
        Unavailable: problemAnswer(503, ["draining", "electing"]),
        MethodNotAllowed: {
          ...problemAnswer(405, ["method_not_allowed"]),
          headers: {
            Allow: { description: "The methods the path takes.", schema: { type: "string" } },
            "X-Request-Id": REQUEST_ID_HEADER,
          },
        },
      },
    },
  };
}
