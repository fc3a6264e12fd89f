/**
 * The cluster hook over the route table: each row's `cluster` flag says whether a follower sends
 * it to the leader (307), answers it from its own copy, or answers it even while electing.
 */

import { assertEquals } from "../_support/assert.ts";
import { startBroker } from "../_support/server.ts";
import { ClusterState } from "../../lib/cluster/state.ts";
import { silentLogger } from "../../lib/log.ts";
import { clusterHook } from "../../routes/cluster.ts";

const LEADER = "http://leader.example:7800";

/** Status and Location of one request, redirects not followed. */
async function ask(url: string, method: string, path: string): Promise<[number, string | null]> {
  const res = await fetch(url + path, { method, redirect: "manual" });
  await res.body?.cancel();
  return [res.status, res.headers.get("location")];
}

Deno.test("a follower sends leader routes to the leader and answers local and always ones", async () => {
  const state = new ClusterState("n1", "http://127.0.0.1:1", silentLogger);
  state.follow({ id: "n2", url: LEADER, term: 1 });
  const b = await startBroker({}, { before: [clusterHook(state)] });
  try {
    assertEquals(await ask(b.url, "POST", "/publish/orders?priority=high"), [
      307,
      `${LEADER}/publish/orders?priority=high`,
    ]);
    assertEquals(await ask(b.url, "GET", "/api/queues"), [307, `${LEADER}/api/queues`]);
    assertEquals(await ask(b.url, "GET", "/api/stats"), [200, null], "local");
    assertEquals(await ask(b.url, "GET", "/healthz"), [200, null], "always");
    assertEquals(await ask(b.url, "GET", "/openapi.json"), [200, null], "always");
  } finally {
    await b.close();
    state.close();
  }
});

Deno.test("while electing only the always routes are answered; the rest get 503 electing", async () => {
  const state = new ClusterState("n1", "http://127.0.0.1:1", silentLogger); // no leader known
  const b = await startBroker({}, { before: [clusterHook(state)] });
  try {
    assertEquals(await ask(b.url, "POST", "/publish/orders"), [503, null]);
    assertEquals(await ask(b.url, "GET", "/api/stats"), [503, null], "local, but electing");
    assertEquals(await ask(b.url, "GET", "/healthz"), [200, null]);
    assertEquals(await ask(b.url, "GET", "/metrics"), [200, null]);
    assertEquals(await ask(b.url, "GET", "/api/cluster/status"), [200, null]);
  } finally {
    await b.close();
    state.close();
  }
});
