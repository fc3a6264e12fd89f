/**
 * One definition of a topic's groups (docs/api/topics-and-groups.md): its named consumer
 * groups, the ones `ferry groups` lists. `ferry topics` and `ferry stats` count them alike, and
 * the broker's /api/queues and /api/stats name the same ones, whatever the default group and a
 * webhook hold.
 */

import { startBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";
import { ferry } from "../_support/cli.ts";
import { assertEquals } from "../_support/assert.ts";
import { call, publish } from "../_support/http.ts";

/** The GROUPS cell of `topic`'s row in a table `ferry` printed. */
function groupsCell(table: string, topic: string): string {
  const lines = table.trimEnd().split("\n");
  const head = lines.findIndex((l) => l.startsWith("TOPIC"));
  const columns = lines[head]!.split(/\s{2,}/);
  const row = lines.slice(head + 1).find((l) => l.startsWith(`${topic} `))!;
  return row.split(/\s+/)[columns.indexOf("GROUPS")]!;
}

Deno.test("ferry topics and ferry stats count a topic's named groups alike", async () => {
  const b = await startBroker({ webhookAllow: LOOPBACK_ALLOW }); // its receiver is on loopback
  const hook = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    await req.body?.cancel();
    return new Response("ok");
  });
  try {
    const url = b.url;
    for (const group of ["billing", "shipping"]) {
      const res = await call(url, "POST", "/api/groups", { json: { topic: "orders", group } });
      assertEquals(res.status, 201, res.text);
    }
    const reg = await call(url, "POST", "/webhook/orders", {
      json: { url: `http://127.0.0.1:${hook.addr.port}/hook` },
    });
    assertEquals(reg.status, 201, reg.text);
    await publish(url, "orders", "a");
    await call(url, "GET", "/consume/orders"); // the default group in use too

    const listed = await ferry(["--json", "groups", "orders"], { url });
    assertEquals(JSON.parse(listed.stdout).map((g: { group: string }) => g.group).sort(), [
      "billing",
      "shipping",
    ]);
    const topics = await ferry(["topics"], { url });
    const stats = await ferry(["stats"], { url });
    assertEquals([topics.code, stats.code], [0, 0], topics.stderr + stats.stderr);
    assertEquals(
      [groupsCell(topics.stdout, "orders"), groupsCell(stats.stdout, "orders")],
      ["2", "2"],
      `ferry topics:\n${topics.stdout}\nferry stats:\n${stats.stdout}`,
    );

    // The broker's two listings name the same groups; /api/stats adds the default one as "".
    const queue = (await call(url, "GET", "/api/queues")).body[0];
    const figures = (await call(url, "GET", "/api/stats")).body.topics.orders;
    assertEquals(queue.groups.sort(), ["billing", "shipping"]);
    assertEquals(Object.keys(figures.groups).sort(), ["", "billing", "shipping"]);
  } finally {
    await hook.shutdown();
    await b.close();
  }
});
