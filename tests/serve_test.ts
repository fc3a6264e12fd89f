/**
 * serve.ts in this process, on a real Deno.serve at 127.0.0.1:0: the "listening" line and the
 * node's URL once bound, the ListenError for an address in use, shutting down without listening
 * again, and the `{ fetch }` that `deno serve main.ts` calls. What main.ts makes of these (the
 * exit codes, listening again after EMFILE) is tested through a child in tests/ops/.
 */

import { assert, assertEquals, assertRejects } from "./_support/assert.ts";
import { type Config, defaultConfig } from "../lib/config.ts";
import { Logger } from "../lib/log.ts";
import { openRuntime, type Runtime } from "../runtime.ts";
import { DeferredFetch, launchedByDenoServe, ListenError, serve } from "../serve.ts";

type Line = Record<string, unknown>;

/** A runtime without disk and a logger whose lines the test reads; `fn` gets both, then closes. */
async function withRuntime(
  overrides: Partial<Config>,
  fn: (config: Config, rt: Runtime, log: Logger, lines: Line[]) => Promise<void>,
): Promise<void> {
  const config = defaultConfig({ dataDir: ":memory:", host: "127.0.0.1", port: 0, ...overrides });
  const lines: Line[] = [];
  const log = new Logger("info", (line) => lines.push(JSON.parse(line)));
  const rt = await openRuntime(config, log);
  try {
    await fn(config, rt, log, lines);
  } finally {
    await rt.broker.close();
  }
}

Deno.test("serve listens on a free port, logs listening with the start-up summary, and serves the broker", async () => {
  await withRuntime({}, async (config, rt, log, lines) => {
    const server = serve(config, rt, log);
    const listening = lines.find((l) => l.msg === "listening");
    assert(listening, JSON.stringify(lines));
    assertEquals(listening.address, "127.0.0.1");
    assertEquals(listening.port, server.addr.port);
    assert(server.addr.port > 0);
    const { topics, messages, duration_ms } = rt.broker.recovery;
    assertEquals(
      [listening.data_dir, listening.fsync, listening.topics, listening.messages],
      [":memory:", config.fsync, topics, messages],
    );
    assertEquals([listening.recovery_ms, listening.auth], [duration_ms, false]);

    const url = `http://127.0.0.1:${server.addr.port}`;
    const res = await fetch(`${url}/publish/served`, { method: "POST", body: "x" });
    assertEquals(res.status, 201, await res.text());

    await server.shutdown();
    await server.finished;
    await assertRejects(() => fetch(`${url}/healthz`)); // nobody listens there any more
    const again = lines.filter((l) => String(l.msg).includes("listening again"));
    assertEquals(again, [], "shutdown() is not a failed accept loop");
  });
});

Deno.test("serve on an address in use logs cannot listen and throws a ListenError naming it", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    await withRuntime({ port }, async (config, rt, log, lines) => {
      let thrown: unknown;
      try {
        await serve(config, rt, log).shutdown();
      } catch (e) {
        thrown = e;
      }
      assert(thrown instanceof ListenError, String(thrown));
      assert(thrown.message.startsWith(`cannot listen on 127.0.0.1:${port}: `), thrown.message);
      assertEquals(thrown.message.split("\n").length, 1);
      const failed = lines.filter((l) => l.msg === "cannot listen");
      assertEquals(failed.map((l) => [l.level, l.address, l.port]), [["error", "127.0.0.1", port]]);
      assertEquals(lines.filter((l) => l.msg === "listening"), []);
    });
  } finally {
    taken.close();
  }
});

Deno.test("in a cluster without an advertised URL, the address serve bound is the node's URL", async () => {
  // No election starts (that is joinCluster's); the etcd address is never dialled.
  await withRuntime(
    { clusterEtcd: ["http://127.0.0.1:9"], advertiseUrl: "" },
    async (c, rt, log) => {
      const server = serve(c, rt, log);
      try {
        assertEquals(rt.broker.cluster?.url, `http://127.0.0.1:${server.addr.port}`);
      } finally {
        await server.shutdown();
      }
    },
  );
});

Deno.test("the deno serve entry answers 503 starting until ready, then with the handler", async () => {
  assertEquals(launchedByDenoServe(), false, "deno test is not deno serve");
  const entry = new DeferredFetch();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, entry.fetch);
  const url = `http://127.0.0.1:${server.addr.port}/healthz`;
  try {
    const early = await fetch(url);
    assertEquals([early.status, await early.text()], [503, "starting"]);
    entry.ready((req) => Promise.resolve(new Response(new URL(req.url).pathname)));
    const later = await fetch(url);
    assertEquals([later.status, await later.text()], [200, "/healthz"]);
  } finally {
    await server.shutdown();
  }
});
