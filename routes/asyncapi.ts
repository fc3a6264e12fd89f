/**
 * The AsyncAPI 3.0 document of the broker's two streaming interfaces, served at
 * GET /asyncapi.json beside the OpenAPI one: the WebSocket at /ws (each client and server frame a
 * message) and the SSE stream at /stream/{topic}. Its schemas are protocol/schemas.ts's, under the
 * same `#/components/schemas/…` names as in /openapi.json, and the SSE event is routes/sse.ts's.
 */

import { SCHEMAS } from "../protocol/schemas.ts";
import { SSE_EVENT } from "./sse.ts";
import { DEFAULT_PREFETCH, PING_INTERVAL_MS } from "./ws.ts";

type Json = Record<string, unknown>;

/** The messages of the variants of a frame schema, named by their `type`. */
function frames(schema: "WsClientFrame" | "WsServerFrame"): Record<string, Json> {
  const out: Record<string, Json> = {};
  SCHEMAS[schema].oneOf.forEach((variant, i) => {
    const type = variant.properties.type.const;
    out[type] = {
      name: type,
      title: `${type} (${schema === "WsClientFrame" ? "client" : "server"})`,
      ...("description" in variant ? { summary: variant.description } : {}),
      payload: { $ref: `#/components/schemas/${schema}/oneOf/${i}` },
    };
  });
  return out;
}

/** The messages of a channel as references, for an operation. */
function refs(channel: string, names: string[]): Json[] {
  return names.map((n) => ({ $ref: `#/channels/${channel}/messages/${n}` }));
}

/** The AsyncAPI 3.0 document, for a broker of `version`. */
export function asyncApiDocument(version: string): Json {
  const client = frames("WsClientFrame");
  const server = frames("WsServerFrame");
  const security = [
    { $ref: "#/components/securitySchemes/bearerAuth" },
    { $ref: "#/components/securitySchemes/apiKeyHeader" },
    { $ref: "#/components/securitySchemes/apiKeyQuery" },
  ];
  return {
    asyncapi: "3.0.0",
    info: {
      title: "Ferry streams",
      version,
      description: "The WebSocket and server-sent-event interfaces of a Ferry broker; the HTTP " +
        "operations are in /openapi.json. With API keys on, both need the `consume` scope.",
    },
    defaultContentType: "application/json",
    servers: {
      ws: {
        host: "127.0.0.1:7800",
        protocol: "ws",
        description: "The broker (its host and port)",
        security,
      },
      http: {
        host: "127.0.0.1:7800",
        protocol: "http",
        description: "The broker, for server-sent events",
        security,
      },
    },
    channels: {
      ws: {
        address: "/ws",
        title: "WebSocket",
        description: "JSON text frames with a `type`. A `subscribe` without `group` or " +
          "`prefetch` spies on a topic, `prefix*` or `*`; with either it consumes one topic " +
          `(prefetch default ${DEFAULT_PREFETCH}), each delivery leased until acked or requeued. ` +
          "Errors are `error` frames and never close the socket. The server pings after " +
          `${PING_INTERVAL_MS / 1000} s of silence and closes with 1001 on drain.`,
        servers: [{ $ref: "#/servers/ws" }],
        messages: { ...client, ...server },
      },
      stream: {
        address: "/stream/{topic}",
        title: "Server-sent events",
        description: "A live copy of every message stored in the topic, and broadcasts; each " +
          "event's `data:` line is JSON, its `id:` the message's sequence number.",
        servers: [{ $ref: "#/servers/http" }],
        parameters: { topic: { description: "The topic." } },
        messages: {
          event: {
            name: "event",
            contentType: "text/event-stream",
            summary: "One event, its `data:` line parsed",
            payload: SSE_EVENT,
          },
        },
      },
    },
    operations: {
      sendFrame: {
        action: "send",
        title: "Frames a client sends",
        channel: { $ref: "#/channels/ws" },
        messages: refs("ws", Object.keys(client)),
      },
      receiveFrame: {
        action: "receive",
        title: "Frames the server sends",
        channel: { $ref: "#/channels/ws" },
        messages: refs("ws", Object.keys(server)),
      },
      receiveEvent: {
        action: "receive",
        title: "Events of a stream",
        channel: { $ref: "#/channels/stream" },
        messages: refs("stream", ["event"]),
      },
    },
    components: {
      schemas: structuredClone(SCHEMAS),
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer" },
        apiKeyHeader: { type: "httpApiKey", in: "header", name: "X-API-Key" },
        apiKeyQuery: {
          type: "httpApiKey",
          in: "query",
          name: "api_key",
          description: "For browsers, which cannot set headers on a WebSocket or EventSource.",
        },
      },
    },
  };
}
