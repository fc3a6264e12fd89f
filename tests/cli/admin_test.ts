/**
 * `ferry topics / topic … / groups / stats / health / drain / webhook …` as a real subprocess
 * against a real broker, in human and --json mode.
 */

import { withLiveBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";
import { ferry } from "../_support/cli.ts";
import { assert, assertEquals, assertMatch } from "../_support/assert.ts";

async function ok(url: string, args: string[]): Promise<string> {
  const r = await ferry(args, { url });
  assertEquals(r.code, 0, `ferry ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

Deno.test("ferry topics lists topics as an aligned table, or as JSON", () =>
  withLiveBroker(async ({ url }) => {
    assertEquals(
      await ok(url, ["topics"]),
      "No topics yet: `ferry publish <topic> <data>` creates one\n",
    );
    assertEquals(JSON.parse(await ok(url, ["--json", "topics"])), []);
    await ok(url, ["publish", "orders", "a"]);
    await ok(url, ["publish", "orders", "b"]);
    await ok(url, ["publish", "invoices-long-name", "c"]);
    const lines = (await ok(url, ["topics"])).trimEnd().split("\n");
    assertEquals(
      lines[0],
      "TOPIC               DEPTH  IN FLIGHT  DELAYED  DLQ  GROUPS  POLICY  RETAIN  OLDEST",
    );
    const rows = lines.slice(1).sort();
    const cut = (row: string) => row.slice(0, "invoices-long-name  ".length + 49);
    assertEquals(rows.map(cut), [
      "invoices-long-name      1          0        0    0       0  reject  -",
      "orders                  2          0        0    0       0  reject  -",
    ]);
    const json = JSON.parse(await ok(url, ["topics", "--json"]));
    assertEquals(json.map((q: { name: string }) => q.name).sort(), [
      "invoices-long-name",
      "orders",
    ]);
  }));

Deno.test("ferry topic create / purge / delete, and a refusal exits 1 with the detail", () =>
  withLiveBroker(async ({ url }) => {
    assertEquals(
      await ok(url, ["topic", "create", "orders", "--policy", "drop-oldest", "--retain", "1h"]),
      'Created topic "orders" (policy drop-oldest, messages kept 1h)\n',
    );
    const json = JSON.parse(await ok(url, ["--json", "topic", "create", "plain"]));
    assertEquals([json.name, json.policy, json.retain], ["plain", "reject", null]);
    const again = await ferry(["topic", "create", "orders"], { url });
    assertEquals([again.code, again.stdout], [1, ""]);
    assertMatch(again.stderr, /^ferry: .*"orders".*exists[^\n]*\n$/);

    await ok(url, ["publish", "orders", "a"]);
    await ok(url, ["publish", "orders", "b"]);
    assertEquals(await ok(url, ["topic", "purge", "orders"]), 'Purged 2 messages from "orders"\n');
    assertEquals(JSON.parse(await ok(url, ["--json", "topic", "purge", "orders"])), {
      queue: "orders",
      purged: 0,
    });
    assertEquals(
      await ok(url, ["topic", "delete", "orders"]),
      'Deleted topic "orders" and its WAL file\n',
    );
    assertEquals(JSON.parse(await ok(url, ["--json", "topic", "delete", "plain"])), {
      queue: "plain",
      deleted: true,
    });
    const gone = await ferry(["topic", "delete", "orders"], { url });
    assertEquals(gone.code, 1);
    assertEquals(
      gone.stderr,
      `ferry: Cannot delete "orders": no such queue; \`ferry topics\` lists what there is\n`,
    );
  }));

Deno.test("ferry groups and redrive, human and JSON", () =>
  withLiveBroker(async ({ url }) => {
    await ok(url, ["publish", "jobs", "x"]);
    assertEquals(await ok(url, ["groups", "jobs"]), "(none)\n");
    await ferry(["consume", "jobs", "--group", "billing"], { url });
    assertEquals(
      JSON.parse(await ok(url, ["--json", "groups", "jobs"])).map((g: { group: string }) =>
        g.group
      ),
      ["billing"],
    );
    assertEquals(JSON.parse(await ok(url, ["--json", "redrive", "jobs"])), {
      queue: "jobs",
      source: "jobs.dlq",
      moved: 0,
    });
    const missing = await ferry(["groups", "nope"], { url });
    assertEquals([missing.code, missing.stderr], [
      1,
      `ferry: Cannot list groups of "nope": no such topic; \`ferry topics\` lists what there is\n`,
    ]);
  }));

Deno.test("ferry stats and health, human and JSON", () =>
  withLiveBroker(async ({ url }) => {
    await ok(url, ["publish", "orders", "a"]);
    const stats = await ok(url, ["stats"]);
    assertMatch(stats, /^uptime \d+(ms|s)\ntotals published 1, delivered 0, acked 0, /);
    assertMatch(
      stats,
      /\nTOPIC\s+DEPTH\s+IN FLIGHT\s+DELAYED\s+GROUPS\s+HELD\s+OLDEST\norders\s+1\s/,
    );
    const json = JSON.parse(await ok(url, ["--json", "stats"]));
    assertEquals(json.totals.published, 1);
    assertEquals(json.topics.orders.depth, 1);

    assertMatch(await ok(url, ["health"]), new RegExp(`^ok  version \\S+  up \\S+  ${url}\\n$`));
    const health = JSON.parse(await ok(url, ["--json", "health"]));
    assertEquals(health.status, "ok");
  }));

Deno.test("ferry drain stops the broker; health then exits 1", () =>
  withLiveBroker(async ({ url }) => {
    assertMatch(await ok(url, ["drain"]), /^Draining: \d+ requests? still in flight; /);
    const h = await ferry(["health"], { url });
    assertEquals(h.code, 1);
    assertMatch(h.stdout, /^draining {2}/);
    assertEquals(h.stderr, `ferry: The broker at ${url} is draining; it takes no requests now\n`);
    const hj = await ferry(["--json", "health"], { url });
    assertEquals([hj.code, JSON.parse(hj.stdout).status], [1, "draining"]);
    const refused = await ferry(["publish", "orders", "x"], { url });
    assertEquals(refused.code, 1);
    assertEquals(
      refused.stderr,
      "ferry: The broker is draining (stopping); retry once it has restarted; only a restart " +
        "of the broker ends a drain\n",
    );
  }));

Deno.test("ferry drain --json prints the drain answer", () =>
  withLiveBroker(async ({ url }) => {
    const json = JSON.parse(await ok(url, ["--json", "drain"]));
    assertEquals(json.status, "draining");
    assert(typeof json.in_flight_requests === "number");
  }));

Deno.test("ferry webhook add / list / delete, human and JSON", async () => {
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      await req.arrayBuffer();
      return new Response(null, { status: 204 });
    },
  );
  const hook = `http://127.0.0.1:${receiver.addr.port}/in`;
  try {
    await withLiveBroker(async ({ url }) => {
      assertMatch(
        await ok(url, ["webhook", "add", "orders", hook]),
        new RegExp(`^Registered webhook \\S+: "orders" → ${hook} \\(unsigned: pass --secret`),
      );
      const signed = JSON.parse(
        await ok(url, ["--json", "webhook", "add", "orders", `${hook}/2`, "--secret", "s3"]),
      );
      assertEquals([signed.topic, signed.url, signed.signed], ["orders", `${hook}/2`, true]);
      assert(!JSON.stringify(signed).includes("s3"), "the secret is never shown");

      const lines = (await ok(url, ["webhook", "list", "orders"])).trimEnd().split("\n");
      assertMatch(lines[0]!, /^ID\s+URL\s+STATE\s+PENDING\s+SIGNED\s+LAST ATTEMPT\s+CREATED$/);
      assertEquals(lines.length, 3);
      const listed = JSON.parse(await ok(url, ["--json", "webhook", "list", "orders"]));
      assertEquals(listed.map((w: { url: string }) => w.url).sort(), [hook, `${hook}/2`]);

      assertEquals(
        await ok(url, ["webhook", "delete", signed.id]),
        `Deleted webhook ${signed.id}\n`,
      );
      const remaining = JSON.parse(await ok(url, ["--json", "webhook", "list", "orders"]));
      assertEquals(remaining.length, 1);
      assertEquals(
        JSON.parse(await ok(url, ["--json", "webhook", "delete", remaining[0].id])),
        { id: remaining[0].id, deleted: true },
      );
      assertMatch(await ok(url, ["webhook", "list", "orders"]), /^No webhooks on "orders"/);
      const bad = await ferry(["webhook", "add", "orders", "not-a-url"], { url });
      assertEquals(bad.code, 1);
    }, { webhookAllow: LOOPBACK_ALLOW }); // the receiver is on loopback
  } finally {
    await receiver.shutdown();
  }
});
