/**
 * GET /asyncapi.json: valid against the official AsyncAPI 3.0.0 JSON Schema (`@asyncapi/specs`,
 * checked with ajv), every `$ref` in it resolves, each WebSocket frame variant of the wire schemas
 * is a message its operations name, and the SSE event is the one /openapi.json documents.
 */

import specs from "@asyncapi/specs";
import { Ajv } from "ajv";
import formats from "ajv-formats";
import { assert, assertEquals } from "../_support/assert.ts";
import { withBroker } from "../_support/server.ts";
import { SCHEMAS } from "../../protocol/schemas.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

/** Every `$ref` of a document that does not resolve inside it. */
function brokenRefs(doc: Json): string[] {
  const broken: string[] = [];
  const resolve = (ref: string) =>
    ref.slice(2).split("/").reduce((v: Json, k) => v?.[k.replaceAll("~1", "/")], doc);
  const visit = (v: Json) => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === "object") {
      if (typeof v.$ref === "string" && resolve(v.$ref) === undefined) broken.push(v.$ref);
      Object.values(v).forEach(visit);
    }
  };
  visit(doc);
  return broken;
}

Deno.test("GET /asyncapi.json is valid AsyncAPI 3.0.0 (@asyncapi/specs) and its $refs resolve", async () => {
  await withBroker({ dataDir: ":memory:" }, async (b) => {
    const res = await b.call("GET", "/asyncapi.json");
    assertEquals(res.status, 200);
    // The bundled schema carries its own draft-07 meta-schema: ajv must not add a second one.
    const ajv = new Ajv({ strict: false, allErrors: true, meta: false, validateSchema: false });
    formats.default(ajv);
    const validate = ajv.compile(specs.schemas["3.0.0"]);
    assert(validate(res.body), JSON.stringify(validate.errors, null, 1)?.slice(0, 3000));
    assertEquals(brokenRefs(res.body), []);

    const bad: Json = structuredClone(res.body);
    bad.operations.sendFrame.action = "push";
    assert(!validate(bad), "the validator refuses a broken document");
  });
});

Deno.test("/asyncapi.json: every frame of the wire schemas is a message of /ws", async () => {
  await withBroker({ dataDir: ":memory:" }, async (b) => {
    const doc = (await b.call("GET", "/asyncapi.json")).body;
    const named = (ops: Json[]) => ops.map((r: Json) => r.$ref.split("/").at(-1)).sort();
    const types = (s: "WsClientFrame" | "WsServerFrame") =>
      SCHEMAS[s].oneOf.map((f) => f.properties.type.const as string).sort();
    assertEquals(named(doc.operations.sendFrame.messages), types("WsClientFrame"));
    assertEquals(named(doc.operations.receiveFrame.messages), types("WsServerFrame"));
    const openapi = (await b.call("GET", "/openapi.json")).body;
    const sse = openapi.paths["/stream/{topic}"].get.responses["200"].content["text/event-stream"];
    assertEquals(doc.channels.stream.messages.event.payload, sse["x-ferry-event"]);
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      assertEquals(schema, openapi.components.schemas[name], name);
    }
  });
});
