/**
 * The webhook sender against real receivers: what it keeps of an answer (nothing from an
 * internal address), no redirects, timeouts, the egress policy at every POST, and connections
 * pinned to a checked address, IPv6 too.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { fetchSender } from "../../net/webhook_sender.ts";
import { EgressPolicy, isInternal, LOOPBACK_ALLOW } from "../../lib/push/egress.ts";

const body = new TextEncoder().encode("hello");
/** The policy of a broker whose receivers are on loopback. */
const loopback = () => new EgressPolicy("", LOOPBACK_ALLOW);

/** A receiver answering 5000 bytes with 202, or a redirect at /moved. */
function talkative(hostname: string) {
  return Deno.serve(
    { hostname, port: 0, onListen: () => {} },
    (req) =>
      new URL(req.url).pathname === "/moved"
        ? Response.redirect("http://127.0.0.1:9/elsewhere", 302)
        : new Response("x".repeat(5000), { status: 202 }),
  );
}

/** An IPv4 address of this machine that is not internal (none on most laptops). */
const publicAddress = Deno.networkInterfaces()
  .find((i) => i.family === "IPv4" && !isInternal(i.address))?.address;

Deno.test("fetchSender() keeps only the status of an internal target's answer; no redirects", async () => {
  const server = talkative("127.0.0.1");
  try {
    const { send } = fetchSender({ policy: loopback() });
    const ok = await send(`http://127.0.0.1:${server.addr.port}/hook`, { headers: {}, body });
    assertEquals(ok, { status: 202, answer: null });
    const moved = await send(`http://127.0.0.1:${server.addr.port}/moved`, { headers: {}, body });
    assertEquals("status" in moved && moved.status, 302, "a redirect is an answer, not followed");
  } finally {
    await server.shutdown();
  }
});

Deno.test({
  name: "fetchSender() keeps the first 1 KiB of a public target's answer",
  ignore: publicAddress === undefined,
  async fn() {
    const server = talkative(publicAddress!);
    try {
      const { send } = fetchSender();
      const ok = await send(`http://${publicAddress}:${server.addr.port}/hook`, {
        headers: {},
        body,
      });
      assertEquals(ok, { status: 202, answer: "x".repeat(1024) });
    } finally {
      await server.shutdown();
    }
  },
});

Deno.test("fetchSender() gives up on an endpoint that does not answer in time", async () => {
  const never = Promise.withResolvers<Response>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => never.promise,
  );
  try {
    const result = await fetchSender({ timeoutMs: 100, policy: loopback() }).send(
      `http://127.0.0.1:${server.addr.port}/slow`,
      {
        headers: {},
        body,
      },
    );
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
  const result = await fetchSender({ policy: loopback() }).send(`http://127.0.0.1:${port}/`, {
    headers: {},
    body,
  });
  assert("error" in result && result.error.length > 0, JSON.stringify(result));
});

Deno.test("fetchSender() checks every address a name resolves to, then connects to one it checked", async () => {
  const hosts: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    hosts.push(req.headers.get("host")!);
    return new Response(null, { status: 204 });
  });
  const port = server.addr.port;
  // A resolver of our own: "receiver.test" is 127.0.0.1; "sneaky.test" also answers metadata.
  const answers: Record<string, string[]> = {
    "receiver.test": ["127.0.0.1"],
    "sneaky.test": ["127.0.0.1", "169.254.169.254"],
  };
  const resolve = (host: string) => Promise.resolve(answers[host] ?? []);
  const { send, vet } = fetchSender({ policy: loopback(), resolve });
  try {
    const ok = await send(`http://receiver.test:${port}/hook`, { headers: {}, body });
    assertEquals("status" in ok && ok.status, 204, JSON.stringify(ok));
    assertEquals(hosts, [`receiver.test:${port}`], "the URL's host, over a checked address");
    const refused = await send(`http://sneaky.test:${port}/hook`, { headers: {}, body });
    assert("refused" in refused && refused.refused.startsWith("169.254.169.254"));
    assertEquals(hosts.length, 1, "nothing sent to a refused name");
    assert((await vet(`http://sneaky.test:${port}/`))?.includes("metadata"));
    assertEquals(await vet(`http://receiver.test:${port}/`), undefined);
    assert((await vet("http://169.254.169.254/latest/meta-data/")) !== undefined);
    const denied = fetchSender({ policy: new EgressPolicy("127.0.0.0/8") });
    const r = await denied.send(`http://127.0.0.1:${port}/hook`, { headers: {}, body });
    assert("refused" in r && r.refused.includes("BROKER_WEBHOOK_DENY (127.0.0.0/8)"));
  } finally {
    await server.shutdown();
  }
});

Deno.test("fetchSender() delivers to a name with only IPv6 addresses, pinned to one it checked", async () => {
  const hosts: string[] = [];
  const server = Deno.serve({ hostname: "::1", port: 0, onListen: () => {} }, (req) => {
    hosts.push(req.headers.get("host")!);
    return new Response("from ::1", { status: 200 });
  });
  const port = server.addr.port;
  const resolve = (host: string) => Promise.resolve(host === "v6only.test" ? ["::1"] : []);
  try {
    const { send, vet } = fetchSender({ policy: loopback(), resolve });
    assertEquals(await vet(`http://v6only.test:${port}/hook`), undefined);
    const ok = await send(`http://v6only.test:${port}/hook`, { headers: {}, body });
    assertEquals(ok, { status: 200, answer: null }, JSON.stringify(ok));
    assertEquals(hosts, [`v6only.test:${port}`]);
    const closed = await fetchSender({ resolve }).send(`http://v6only.test:${port}/`, {
      headers: {},
      body,
    });
    assert(
      "refused" in closed && closed.refused.startsWith("::1 is loopback"),
      JSON.stringify(closed),
    );
  } finally {
    await server.shutdown();
  }
});
