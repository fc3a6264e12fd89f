/**
 * The webhook egress policy through a real broker: a refused target is a 400 at registration,
 * and checked again at every delivery, so a webhook registered before its target was denied
 * sends nothing and dead-letters its messages with the reason. Loopback is refused unless
 * BROKER_WEBHOOK_ALLOW names it, unspecified addresses always; the attempts log keeps no answer
 * from an internal target; a name with only IPv6 addresses is delivered to; start-up logs the
 * policy once. A bad range stops start-up naming the setting.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { logLines, runMain, start, stop, withDataDir } from "../_support/child.ts";
import { assertProblem, call, type Json, publish } from "../_support/http.ts";
import { type InProcessBroker, startBroker } from "../_support/server.ts";
import type { Config } from "../../lib/config.ts";
import { eventually, Inbox } from "../_support/wait.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";

/** A receiver on `hostname` that answers every POST with a "secret" body, as a local service would. */
function service(hostname: string) {
  const got = new Inbox<string>();
  const server = Deno.serve({ hostname, port: 0, onListen: () => {} }, async (req) => {
    got.push(await req.text());
    return new Response("INTERNAL-ANSWER secret-token=abc123", { status: 200 });
  });
  return { port: server.addr.port, got, close: () => server.shutdown() };
}

/** The attempts of the only webhook of `topic`, once there is one. */
async function attemptsOf(b: { url: string }, topic: string): Promise<Json[]> {
  const [hook] = (await call(b.url, "GET", `/api/webhooks?topic=${topic}`)).body;
  let log: Json[] = [];
  await eventually(
    async () => {
      log = (await call(b.url, "GET", `/api/webhooks/${hook.id}/attempts`)).body;
      return log.length > 0;
    },
    10_000,
    `an attempt of the webhook of ${topic}`,
  );
  return log;
}

Deno.test("webhook egress: a denied target is refused at registration and again at delivery", async () => {
  const hits: string[] = [];
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      hits.push(await req.text());
      return new Response(null, { status: 204 });
    },
  );
  const hook = `http://127.0.0.1:${receiver.addr.port}/hook`;
  const deny = { BROKER_WEBHOOK_DENY: "127.0.0.0/8,::1" };
  try {
    await withDataDir(async (dir) => {
      const open = await start(dir, { BROKER_WEBHOOK_ALLOW: LOOPBACK_ALLOW });
      const added = await call(open.url, "POST", "/webhook/orders", { json: { url: hook } });
      assertEquals(added.status, 201, added.text);
      const metadata = await call(open.url, "POST", "/webhook/orders", {
        json: { url: "http://169.254.169.254/latest/meta-data/" },
      });
      assertProblem(metadata, 400, "invalid_parameter");
      assert(metadata.text.includes("metadata address"), metadata.text);
      await stop(open, "SIGTERM");

      const closed = await start(dir, deny);
      const again = await call(closed.url, "POST", "/webhook/other", { json: { url: hook } });
      assertProblem(again, 400, "invalid_parameter");
      assert(again.text.includes("BROKER_WEBHOOK_DENY (127.0.0.0/8)"), again.text);
      // Registered before the policy: each delivery is checked, refused, and dead-lettered.
      assertEquals(
        (await call(closed.url, "POST", "/publish/orders", { body: "o-1" })).status,
        201,
      );
      // A long poll on the dead-letter queue answers once the push has dead-lettered it.
      const dead = await call(closed.url, "GET", "/consume/orders.dlq?timeout=10s");
      const m = dead.body as { payload_text: string; reason: string };
      assertEquals(m.payload_text, "o-1", dead.text);
      assertEquals(
        m.reason,
        "webhook target refused: 127.0.0.1 is in BROKER_WEBHOOK_DENY (127.0.0.0/8)",
      );
      assertEquals(hits, [], "nothing reached the denied receiver");
      await stop(closed, "SIGTERM");
    });
  } finally {
    await receiver.shutdown();
  }
});

Deno.test("webhook egress: a range that does not parse stops start-up with exit 2 naming the setting", async () => {
  const out = await runMain({ dataDir: ":memory:", env: { BROKER_WEBHOOK_ALLOW: "10.0.0.0/40" } });
  assertEquals(out.code, 2, out.stderr);
  assert(
    out.stderr.includes('BROKER_WEBHOOK_ALLOW: "10.0.0.0/40" is not an address range'),
    out.stderr,
  );
});

Deno.test("webhook egress: loopback is refused by default, naming the setting that allows it", async () => {
  const local = service("127.0.0.1");
  try {
    await withDataDir(async (dir) => {
      const b = await start(dir);
      const res = await call(b.url, "POST", "/webhook/local", {
        json: { url: `http://127.0.0.1:${local.port}/hook` },
      });
      assertProblem(res, 400, "invalid_parameter");
      assertEquals(
        res.body.detail,
        `Cannot register a webhook to http://127.0.0.1:${local.port}/hook: the target is ` +
          "refused: 127.0.0.1 is loopback; BROKER_WEBHOOK_ALLOW must name it (e.g. 127.0.0.0/8) " +
          "to allow it",
      );
      for (const host of ["localhost", "[::1]", "[::ffff:127.0.0.1]", "[64:ff9b::7f00:1]"]) {
        const other = await call(b.url, "POST", "/webhook/local", {
          json: { url: `http://${host}:${local.port}/hook` },
        });
        assertProblem(other, 400, "invalid_parameter");
        assert(other.body.detail.includes("BROKER_WEBHOOK_ALLOW must name it"), other.text);
      }
      // "Allow everything" does not open loopback (nor metadata).
      const everything = await start(`${dir}/all`, { BROKER_WEBHOOK_ALLOW: "0.0.0.0/0,::/0" });
      assertProblem(
        await call(everything.url, "POST", "/webhook/local", {
          json: { url: `http://127.0.0.1:${local.port}/hook` },
        }),
        400,
        "invalid_parameter",
      );
      assertEquals(local.got.items, []);
    });
  } finally {
    await local.close();
  }
});

Deno.test("webhook egress: every spelling of 0.0.0.0 and :: is refused, whatever BROKER_WEBHOOK_ALLOW says", async () => {
  const local = service("127.0.0.1");
  const p = local.port;
  const urls = [
    `http://0.0.0.0:${p}/zero`,
    `http://0:${p}/`,
    `http://0x0:${p}/`,
    `http://00000000:${p}/`,
    `http://0.0.0.0.:${p}/`,
    `http://[::]:${p}/v6any`,
    `http://[0::]:${p}/`,
    `http://[::0.0.0.0]:${p}/`,
    `http://[::ffff:0.0.0.0]:${p}/m`,
    `http://[::ffff:0:0]:${p}/`,
  ];
  try {
    await withDataDir(async (dir) => {
      // The review's broker: the documented "deny loopback too" list; and one that opens it all.
      for (
        const env of <Record<string, string>[]> [
          {
            BROKER_WEBHOOK_DENY: "127.0.0.0/8,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7",
          },
          { BROKER_WEBHOOK_ALLOW: `${LOOPBACK_ALLOW},0.0.0.0/0,::/0` },
        ]
      ) {
        const b = await start(`${dir}/${Object.keys(env)[0]}`, env);
        for (const [i, url] of urls.entries()) {
          const res = await call(b.url, "POST", `/webhook/dz${i}`, { json: { url } });
          assertProblem(res, 400, "invalid_parameter");
          assertMatch(res.body.detail, /is unspecified \((0\.0\.0\.0\/8|::\/128)\)/, url);
        }
        await stop(b, "SIGTERM");
      }
      assertEquals(local.got.items, [], "nothing reached the loopback service");
    });
  } finally {
    await local.close();
  }
});

/** An in-process broker whose webhook hosts resolve through `answers` (a name → its addresses). */
async function brokerResolving(
  answers: Map<string, string[]>,
  policy: Partial<Config> = { webhookAllow: LOOPBACK_ALLOW },
): Promise<InProcessBroker> {
  return await startBroker({ ...policy, webhookRetryScheduleMs: [60_000] }, {
    resolve: (host) => Promise.resolve(answers.get(host) ?? []),
  });
}

Deno.test("webhook egress: a name that resolves to 0.0.0.0 at delivery is refused and dead-lettered", async () => {
  const local = service("127.0.0.1");
  // A public address at registration; the review's "deny loopback too" broker.
  const answers = new Map([["zero.test", ["203.0.113.9"]]]);
  const b = await brokerResolving(answers, { webhookDeny: "127.0.0.0/8,::1" });
  try {
    const reg = await call(b.url, "POST", "/webhook/zname", {
      json: { url: `http://zero.test:${local.port}/via-name` },
    });
    assertEquals(reg.status, 201, reg.text);
    answers.set("zero.test", ["0.0.0.0"]); // the name is re-pointed after registration
    await publish(b.url, "zname", "via-name");
    const dead = await call(b.url, "GET", "/consume/zname.dlq?timeout=10s");
    assertEquals(
      dead.body?.reason,
      "webhook target refused: 0.0.0.0 is unspecified (0.0.0.0/8): " +
        "it reaches the broker's own host, and no setting allows it",
      dead.text,
    );
    assertEquals(local.got.items, [], "nothing reached the loopback service");
  } finally {
    await b.close();
    await local.close();
  }
});

Deno.test("webhook egress: the attempts log keeps the status of a loopback target's answer, not its body", async () => {
  const local = service("127.0.0.1");
  try {
    await withDataDir(async (dir) => {
      const b = await start(dir, { BROKER_WEBHOOK_ALLOW: LOOPBACK_ALLOW });
      const reg = await call(b.url, "POST", "/webhook/ssrf", {
        json: { url: `http://127.0.0.1:${local.port}/v3/kv/put` },
      });
      assertEquals(reg.status, 201, reg.text);
      await publish(b.url, "ssrf", '{"key":"L2ZlcnJ5L2xlYWRlcg=="}');
      await local.got.take(1, 10_000, "POSTs");
      const [attempt] = await attemptsOf(b, "ssrf");
      assertEquals([attempt.status, attempt.outcome, attempt.answer], [200, "delivered", null]);
      assert(typeof attempt.latency_ms === "number");
      const all = await call(b.url, "GET", "/api/webhooks?topic=ssrf");
      assert(!all.text.includes("secret-token"), all.text);
    });
  } finally {
    await local.close();
  }
});

Deno.test("webhook egress: a name with only an IPv6 address is delivered to", async () => {
  const v6 = service("::1");
  const b = await brokerResolving(new Map([["v6only.test", ["::1"]]]));
  try {
    const reg = await call(b.url, "POST", "/webhook/v6only", {
      json: { url: `http://v6only.test:${v6.port}/hook` },
    });
    assertEquals(reg.status, 201, reg.text);
    await publish(b.url, "v6only", "over IPv6");
    assertEquals(await v6.got.take(1, 10_000, "POSTs to [::1]"), ["over IPv6"]);
    const [attempt] = await attemptsOf(b, "v6only");
    assertEquals([attempt.status, attempt.outcome, attempt.error], [200, "delivered", null]);
  } finally {
    await b.close();
    await v6.close();
  }
});

Deno.test("webhook egress: start-up logs the policy once, beside listening, with one worker or two", async () => {
  await withDataDir(async (dir) => {
    for (const workers of ["1", "2"]) {
      const b = await start(`${dir}/w${workers}`, { BROKER_WORKERS: workers });
      const lines = logLines(b).filter((l) => l.msg === "webhook egress");
      assertEquals(lines.length, 1, b.logs.join("\n"));
      const [line] = lines;
      assert((line!.refused as string[]).includes("127.0.0.0/8"), JSON.stringify(line));
      assert((line!.refused as string[]).includes("0.0.0.0/8"), JSON.stringify(line));
      assertMatch(String(line!.loopback), /BROKER_WEBHOOK_ALLOW=127\.0\.0\.0\/8,::1/);
      await stop(b, "SIGTERM");
    }
  });
});
