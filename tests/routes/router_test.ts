import { assertEquals, assertThrows } from "../_support/assert.ts";
import { acceptsOf } from "../../routes/accepts.ts";
import { type Route, Router } from "../../routes/router.ts";
import { BrokerError } from "../../lib/errors.ts";

const ok = () => new Response(null);
const route = (method: string, pattern: string, mutates?: true): Route => ({
  method,
  pattern,
  scope: "public",
  handler: ok,
  ...(mutates ? { mutates } : {}),
});

const table = [
  route("POST", "/publish/:topic"),
  route("POST", "/publish/:topic/batch"),
  route("GET", "/consume/:topic", true),
  route("GET", "/api/topics"),
  route("POST", "/api/topics"),
  route("GET", "/api/topics/:name"),
  route("GET", "/healthz"),
  route("GET", "/:file"),
  route("PUT", "/api/:thing"),
];
const router = new Router(table, (r) => acceptsOf(r, false));

function matched(method: string, path: string) {
  const m = router.match(method, path);
  if (!m) return undefined;
  if ("allowed" in m) return { allowed: m.allowed };
  return { pattern: m.route.pattern, method: m.route.method, params: m.params };
}

Deno.test("Router.match() finds the first route in table order with its parameters decoded", () => {
  assertEquals(matched("POST", "/publish/a%20b"), {
    pattern: "/publish/:topic",
    method: "POST",
    params: { topic: "a b" },
  });
  assertEquals(matched("POST", "/publish/t/batch"), {
    pattern: "/publish/:topic/batch",
    method: "POST",
    params: { topic: "t" },
  });
  assertEquals(matched("GET", "/api/topics/x"), {
    pattern: "/api/topics/:name",
    method: "GET",
    params: { name: "x" },
  });
  assertEquals(matched("GET", "/healthz")?.pattern, "/healthz");
  // A route that starts with a parameter matches paths whose first segment no route names...
  assertEquals(matched("GET", "/index.html")?.params, { file: "index.html" });
  // ...and after the literal routes listed before it.
  assertEquals(matched("PUT", "/api/x")?.pattern, "/api/:thing");
});

Deno.test("Router.match() says which methods a path allows, and undefined for no route", () => {
  assertEquals(matched("DELETE", "/api/topics"), { allowed: ["GET", "POST", "GET", "PUT"] });
  assertEquals(matched("DELETE", "/healthz"), { allowed: ["GET", "GET"] });
  assertEquals(matched("GET", "/publish/t/other"), undefined);
  assertEquals(matched("GET", "/nothing/here"), undefined);
});

Deno.test("Router.match() lets a missing last parameter through empty, and HEAD only on non-mutating GETs", () => {
  assertEquals(matched("POST", "/publish")?.params, { topic: "" });
  assertEquals(matched("POST", "/publish/")?.params, { topic: "" });
  assertEquals(matched("HEAD", "/healthz")?.method, "GET");
  assertEquals(matched("HEAD", "/consume/t"), { allowed: ["GET"] });
});

Deno.test("Router.match() refuses a parameter with bad percent-encoding as invalid_name", () => {
  const e = assertThrows(() => router.match("POST", "/publish/%E0%A4%A"), "invalid_name");
  assertEquals(e instanceof BrokerError, true);
});
