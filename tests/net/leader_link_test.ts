import { assertEquals } from "../_support/assert.ts";
import { Broker } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { ClusterState } from "../../lib/cluster/state.ts";
import { Logger } from "../../lib/log.ts";
import { ReplicaClient } from "../../net/leader_link.ts";

Deno.test("ReplicaClient sends its key to the leader as Authorization: Bearer, never in the URL", async () => {
  const seen = Promise.withResolvers<{ url: string; auth: string | null }>();
  // A stand-in leader on loopback: it records the upgrade request and holds the socket open.
  const leader = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    seen.resolve({ url: req.url, auth: req.headers.get("authorization") });
    return Deno.upgradeWebSocket(req).response;
  });
  const log = new Logger("error", () => {});
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:" }), { tick: false });
  const state = new ClusterState("follower-1", "http://127.0.0.1:1", log);
  const client = new ReplicaClient(broker, state, log, "adm-secret-key");
  try {
    state.follow({ id: "leader-1", url: `http://127.0.0.1:${leader.addr.port}`, term: 3 });
    const { url, auth } = await seen.promise;
    assertEquals(auth, "Bearer adm-secret-key");
    const u = new URL(url);
    assertEquals(u.pathname, "/cluster/replicate");
    assertEquals([...u.searchParams.keys()], ["node", "term"], url);
  } finally {
    client.close();
    state.close();
    await broker.close();
    await leader.shutdown();
  }
});
