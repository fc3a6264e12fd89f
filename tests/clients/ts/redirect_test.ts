/**
 * Where the API key goes on a redirect (docs/typescript-client.md, "Redirects"): real local
 * servers on loopback, a real broker behind them, and a recorder that says what reached it.
 * Deno's and Node's fetch keep `X-API-Key` on a redirect to any host, so the client follows by
 * hand.
 */

import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { withLiveBroker } from "../../_support/server.ts";
import { makePki } from "../../_support/tls.ts";
import { Ferry, FerryError } from "../../../clients/ts/mod.ts";

/** A server on 127.0.0.1 that records the API key of each request and answers 200 `{}`. */
function recorder() {
  const keys: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    keys.push(req.headers.get("x-api-key"));
    return Response.json({ id: "x", topic: "t", timestamp: "", priority: "normal" });
  });
  return { keys, url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

/** A front on 127.0.0.1 that answers every request with a 307 to `to` + its path. */
function redirector(to: () => string, status?: (req: Request) => Response | undefined) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const u = new URL(req.url);
    return status?.(req) ??
      new Response(null, { status: 307, headers: { location: to() + u.pathname + u.search } });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

Deno.test("redirects: the API key never follows a 307 to a host that is not the cluster's", async () => {
  const elsewhere = recorder();
  const front = redirector(() => elsewhere.url);
  try {
    const ferry = new Ferry({ url: front.url, apiKey: "secret-key", retries: 0 });
    const e = await ferry.publish("orders", "x").catch((e) => e);
    assert(e instanceof FerryError, String(e));
    assertEquals([e.status, e.code], [307, "redirect_refused"]);
    assertMatch(e.message, /POST \/publish\/orders: .*redirected to http:\/\/127\.0\.0\.1:\d+/);
    assertMatch(e.detail, /clusterNodes/, "the message names the option that fixes it");
    assertEquals(elsewhere.keys, [], "nothing reached the other host");

    // Without a key there is nothing to leak: followed.
    await new Ferry({ url: front.url, retries: 0 }).publish("orders", "x");
    assertEquals(elsewhere.keys, [null]);
  } finally {
    await front.close();
    await elsewhere.close();
  }
});

Deno.test("redirects: the key goes to a node named in clusterNodes or listed by the cluster status", async () => {
  await withLiveBroker(async (b) => {
    const front = redirector(() => b.url);
    const listing = redirector(
      () => b.url,
      (req) =>
        new URL(req.url).pathname === "/api/cluster/status"
          ? Response.json({ mode: "cluster", role: "follower", leader: b.url, peers: [] })
          : undefined,
    );
    try {
      const named = new Ferry({ url: front.url, apiKey: "k", clusterNodes: [b.url] });
      const p = await named.publish("moved", "by name");
      const listed = new Ferry({ url: listing.url, apiKey: "k" });
      const q = await listed.publish("moved", "by status");
      const got = await named.consume("moved", { limit: 2 });
      assertEquals(got.map((m) => m.id), [p.id, q.id]);
      // The front answers its own status with 307: no list, so the leader stays unknown.
      const e = await new Ferry({ url: front.url, apiKey: "k" }).publish("moved", "x")
        .catch((e) => e);
      assertEquals((e as FerryError).code, "redirect_refused");
    } finally {
      await front.close();
      await listing.close();
    }
  });
});

Deno.test("redirects: never from https to plain http, key or not", async () => {
  const pki = await makePki();
  const plain = recorder();
  const tls = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(pki.certFile),
    key: await Deno.readTextFile(pki.keyFile),
    onListen: () => {},
  }, (req) => {
    const u = new URL(req.url);
    return new Response(null, { status: 307, headers: { location: plain.url + u.pathname } });
  });
  const client = Deno.createHttpClient({ caCerts: [pki.ca] });
  try {
    for (const apiKey of ["secret-key", undefined]) {
      const ferry = new Ferry({
        url: `https://localhost:${tls.addr.port}`,
        apiKey,
        clusterNodes: [plain.url],
        fetchOptions: { client },
        retries: 0,
      });
      const e = await ferry.publish("orders", "x").catch((e) => e);
      assert(e instanceof FerryError, String(e));
      assertEquals(e.code, "redirect_refused");
      assertMatch(e.detail, /from HTTPS to plain HTTP/);
    }
    assertEquals(plain.keys, [], "the plain-HTTP server heard nothing");
  } finally {
    client.close();
    await tls.shutdown();
    await plain.close();
    await pki.remove();
  }
});
