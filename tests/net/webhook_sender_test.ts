import { assert, assertEquals } from "../_support/assert.ts";
import { fetchSender } from "../../net/webhook_sender.ts";

const body = new TextEncoder().encode("hello");

Deno.test("fetchSender() reports the status and the first 1 KiB of the answer; no redirects", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) =>
      new URL(req.url).pathname === "/moved"
        ? Response.redirect("http://127.0.0.1:9/elsewhere", 302)
        : new Response("x".repeat(5000), { status: 202 }),
  );
  try {
    const send = fetchSender();
    const ok = await send(`http://127.0.0.1:${server.addr.port}/hook`, { headers: {}, body });
    assertEquals(ok, { status: 202, answer: "x".repeat(1024) });
    const moved = await send(`http://127.0.0.1:${server.addr.port}/moved`, { headers: {}, body });
    assertEquals("status" in moved && moved.status, 302, "a redirect is an answer, not followed");
  } finally {
    await server.shutdown();
  }
});

Deno.test("fetchSender() gives up on an endpoint that does not answer in time", async () => {
  const never = Promise.withResolvers<Response>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => never.promise,
  );
  try {
    const result = await fetchSender(100)(`http://127.0.0.1:${server.addr.port}/slow`, {
      headers: {},
      body,
    });
    assertEquals(result, { error: "no answer within 0.1 s" });
  } finally {
    never.resolve(new Response(null, { status: 204 }));
    await server.shutdown();
  }
});

Deno.test("fetchSender() reports a refused connection as an error", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const result = await fetchSender()(`http://127.0.0.1:${port}/`, { headers: {}, body });
  assert("error" in result && result.error.length > 0, JSON.stringify(result));
});
