/**
 * Seeded request parts for the HTTP fuzzer: methods, API-key headers, X-MQ-* and other headers,
 * Host values, publish payloads and JSON bodies (malformed, wrong types, deep, huge id arrays).
 * Each generator also returns a short tag, so a report can say which inputs caused what.
 */

import { BAD_NAMES, type Bytes, deepJson, DEPTHS, type Rand } from "./values.ts";

/** A header list in send order; names may repeat. */
export type HeaderList = [string, string][];

/** The two API keys the fuzzed broker is started with. */
export interface Keys {
  admin: string;
  publish: string;
}

/** Methods besides a route's own: HEAD, OPTIONS, ones fetch refuses, and made-up ones. */
export const METHODS = [
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "PATCH",
  "OPTIONS",
  "TRACE",
  "CONNECT",
  "PROPFIND",
  "FOO",
  "get",
  "Post",
  "M-SEARCH",
  "X".repeat(300),
];

/** The key headers of a request: mostly (if `admin`, always) the admin key, else a bad one. */
export function authHeaders(
  r: Rand,
  keys: Keys,
  admin = false,
): { headers: HeaderList; tag?: string } {
  if (admin) return { headers: [["authorization", `Bearer ${keys.admin}`]] };
  if (r.chance(0.88)) {
    return {
      headers: r.chance(0.75)
        ? [["authorization", `Bearer ${keys.admin}`]]
        : [["x-api-key", keys.admin]],
    };
  }
  const [tag, headers] = r.pick<[string, HeaderList]>([
    ["auth:none", []],
    ["auth:wrong", [["authorization", "Bearer not-a-key"]]],
    ["auth:publish-only", [["authorization", `Bearer ${keys.publish}`]]],
    ["auth:publish-only", [["x-api-key", keys.publish]]],
    ["auth:basic", [["authorization", "Basic YWRtaW46YWRtaW4="]]],
    ["auth:bearer-empty", [["authorization", "Bearer"]]],
    ["auth:lowercase", [["authorization", `bearer ${keys.admin}`]]],
    ["auth:spaces", [["authorization", `Bearer   ${keys.admin}  `]]],
    ["auth:empty-x-api-key", [["x-api-key", ""]]],
    ["auth:long", [["authorization", `Bearer ${"k".repeat(600)}`]]],
    ["auth:prefix", [["authorization", `Bearer ${keys.admin.slice(0, -1)}`]]],
    ["auth:both", [["authorization", "Bearer nope"], ["x-api-key", keys.admin]]],
    ["auth:unicode", [["x-api-key", "ключ"]]],
  ]);
  return { headers, tag };
}

/** `count` X-MQ-* headers of `size` bytes each, tagged with both. */
export function mqHeaderList(count: number, size: number): { headers: HeaderList; tag: string } {
  const headers: HeaderList = [];
  for (let i = 0; i < count; i++) headers.push([`x-mq-h${i}`, "v".repeat(size)]);
  return { headers, tag: `x-mq:${count}x${size}B` };
}

/** Many X-MQ-* headers: counts around the HTTP layer's header limit, sizes around 16 KiB. */
export function mqHeaders(r: Rand): { headers: HeaderList; tag: string } {
  const count = r.pick([1, 3, 20, 90, 99, 100, 101, 140, 300]);
  const size = r.pick([0, 1, 16, 200, 1000, 8000, 16_400]);
  return mqHeaderList(count, Math.min(size, Math.floor(64 * 1024 / count)));
}

/** Odd headers, built once: Idempotency-Key, X-Request-Id, Content-Type, huge ones, long names. */
const ODD_HEADERS: [string, HeaderList][] = [
  ["idem:256", [["idempotency-key", "k".repeat(256)]]],
  ["idem:257", [["idempotency-key", "k".repeat(257)]]],
  ["idem:empty", [["idempotency-key", ""]]],
  ["idem:unicode", [["idempotency-key", "ключ-🔑"]]],
  ["idem:10k", [["idempotency-key", "k".repeat(10_000)]]],
  ["idem:twice", [["idempotency-key", "a"], ["idempotency-key", "b"]]],
  ["request-id:long", [["x-request-id", "r".repeat(129)]]],
  ["request-id:odd", [["x-request-id", "../<script>"]]],
  ["request-id:sane", [["x-request-id", "fuzz-req.1:2_3"]]],
  ["ct:json", [["content-type", "application/json"]]],
  ["ct:utf16", [["content-type", "text/plain; charset=utf-16"]]],
  ["ct:multipart", [["content-type", "multipart/form-data; boundary=x"]]],
  ["ct:form", [["content-type", "application/x-www-form-urlencoded"]]],
  ["ct:long", [["content-type", "a/" + "b".repeat(20_000)]]],
  ["ct:twice", [["content-type", "text/plain"], ["content-type", "application/json"]]],
  ["ct:latin1", [["content-type", "text/\u00ff"]]],
  ["hdr:64KiB", [["x-big", "b".repeat(64 * 1024)]]],
  ["hdr:1MiB", [["x-big", "b".repeat(1024 * 1024)]]],
  ["hdr:long-name", [[`x-mq-${"n".repeat(5000)}`, "v"]]],
  ["hdr:expect", [["expect", "100-continue"]]],
  ["hdr:te-gzip", [["te", "gzip"]]],
  ["hdr:upgrade", [["connection", "upgrade"], ["upgrade", "websocket"]]],
  ["hdr:ctrl", [["x-mq-ctrl", "a\u0001b"]]],
  ["hdr:nl", [["x-mq-nl", "a\nb"]]],
];

/** One odd header: Idempotency-Key, X-Request-Id, Content-Type, a huge one, a long name. */
export function oddHeader(r: Rand): { headers: HeaderList; tag: string } {
  const [tag, headers] = r.pick(ODD_HEADERS);
  return { headers, tag };
}

/** Host header values; fetch always sends the real host, so these go over a raw socket. */
export const HOSTS = [
  "@",
  "@@",
  "user@host",
  "",
  "a b",
  "[::1",
  "[",
  "x:99999",
  ":80",
  "%zz",
  "ü",
  "a/b",
  "a?b",
  "a#b",
  "..",
  "h".repeat(5000),
  "localhost:7800",
  "127.0.0.1:0",
];

/** A publish body: mostly small, sometimes binary or invalid UTF-8, rarely over 2 MiB. */
export function payload(r: Rand): { body: Bytes; tag?: string } {
  const enc = new TextEncoder();
  switch (r.int(12)) {
    case 0:
      return { body: new Uint8Array(0), tag: "body:empty" };
    case 1:
      return { body: r.bytes(1 + r.int(512)), tag: "body:binary" };
    case 2:
      return { body: new Uint8Array([0xff, 0xfe, 0x00, 0xc3, 0x28]), tag: "body:bad-utf8" };
    case 3:
      return { body: r.bytes(64 * 1024), tag: "body:64KiB" };
    case 4:
      if (r.chance(0.1)) {
        const size = r.pick([2 * 1024 * 1024 + 1, 3 * 1024 * 1024]);
        return { body: new Uint8Array(size), tag: `body:${size}B` };
      }
      return { body: enc.encode(deepJson(r, r.pick(DEPTHS))), tag: "body:deep" };
    case 5:
    case 6:
      return { body: enc.encode(JSON.stringify({ k: r.pick(["v", "w"]), n: { m: r.int(3) } })) };
    default:
      return { body: enc.encode(`m-${r.int(1e6)}`) };
  }
}

/** JSON bodies that are not a well-formed object: a parser's bad day. */
export const MALFORMED_JSON = [
  "{",
  '{"a":}',
  "[",
  "null",
  "1",
  '"s"',
  "[]",
  '{"a":1,}',
  "{'a':1}",
  "NaN",
  '{"a":NaN}',
  "\ufeff{}",
  "{}garbage",
  '{"a":"\\x"}',
  '{"a":"\\ud800"}',
  " ".repeat(100_000) + "{}",
  '{"__proto__":{"name":"x","queue":"x","ids":["x"]}}',
  '{"name":"fz-a","name":1}',
];

/** A malformed or non-object JSON body, or non-JSON bytes. */
export function badJsonBody(r: Rand): { body: Bytes; tag: string } {
  const enc = new TextEncoder();
  switch (r.int(5)) {
    case 0:
      return { body: r.bytes(1 + r.int(256)), tag: "json:binary" };
    case 1:
      return { body: enc.encode(deepJson(r, r.pick(DEPTHS))), tag: "json:deep-root" };
    case 2:
      return { body: new Uint8Array(0), tag: "json:empty" };
    default:
      return { body: enc.encode(r.pick(MALFORMED_JSON)), tag: "json:malformed" };
  }
}

/** An `ids` array for batch ack: learned ids, junk, and sizes around the 10,000 limit. */
export function idsJson(r: Rand, learned: readonly string[], bad: boolean): string {
  const one = () => learned.length && r.chance(0.7) ? r.pick(learned) : crypto.randomUUID();
  if (!bad) return JSON.stringify(Array.from({ length: 1 + r.int(5) }, one));
  const n = r.pick([0, 10_000, 10_001, 100_000]);
  if (r.chance(0.4)) return JSON.stringify(Array.from({ length: n }, one));
  return r.pick([
    "[]",
    "[1,2]",
    '["a",1]',
    "[null]",
    '"x"',
    "{}",
    JSON.stringify(BAD_NAMES),
    JSON.stringify(Array.from({ length: n }, () => "x")),
  ]);
}
