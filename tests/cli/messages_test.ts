/**
 * `ferry publish / consume / ack / requeue / peek` as a real subprocess against a real broker,
 * in human and --json mode.
 */

import { withLiveBroker } from "../_support/server.ts";
import type { Broker } from "../../lib/broker.ts";
import { ferry, spawnFerry } from "../_support/cli.ts";
import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import type { MessageJson, PublishAnswer } from "../../protocol/wire.ts";

const ID = "[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}";

/** Runs ferry and expects exit 0; answers stdout. */
async function ok(url: string, args: string[], stdin?: string): Promise<string> {
  const r = await ferry(args, { url, stdin });
  assertEquals(r.code, 0, `ferry ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

Deno.test("ferry publish prints the id; consume prints the message, acks it, and exits 1 when empty", () =>
  withLiveBroker(async ({ url }) => {
    const published = await ok(url, ["publish", "orders", '{"sku":"a1"}']);
    assertMatch(published, new RegExp(`^Published ${ID} to "orders"\\n$`));
    const consumed = await ok(url, ["consume", "orders"]);
    const [head, body] = consumed.trimEnd().split("\n");
    assertMatch(head!, new RegExp(`^${ID}  orders  (just now|\\ds ago)$`));
    assertEquals(body, '{"sku":"a1"}');
    const empty = await ferry(["consume", "orders"], { url });
    assertEquals(empty.code, 1);
    assertEquals(empty.stdout, "");
    assertEquals(
      empty.stderr,
      'ferry: No message available in "orders"; publish first, or wait for one with --wait 30s\n',
    );
    const emptyJson = await ferry(["--json", "consume", "orders"], { url });
    assertEquals([emptyJson.code, JSON.parse(emptyJson.stdout)], [1, []]);
  }));

Deno.test("ferry --json publish passes ttl, delay, priority, key and X-MQ headers", () =>
  withLiveBroker(async ({ url }) => {
    const args = [
      "--json",
      "publish",
      "orders",
      "hello",
      "--ttl",
      "1h",
      "--priority",
      "high",
      "--key",
      "k-1",
      "--header",
      "X-MQ-Trace: t-1",
      "--header",
      "x-mq-tenant:acme",
    ];
    const first = JSON.parse(await ok(url, args)) as PublishAnswer;
    assertMatch(first.id, new RegExp(`^${ID}$`));
    assertEquals([first.topic, first.priority, first.deduplicated], ["orders", "high", false]);
    assert(first.expires_at, "expires_at is set by --ttl");
    const again = JSON.parse(await ok(url, args)) as PublishAnswer;
    assertEquals([again.id, again.deduplicated], [first.id, true]);
    assertMatch(await ok(url, args.slice(1)), /\(deduplicated: the key was seen, nothing stored/);

    const delayed = JSON.parse(
      await ok(url, ["--json", "publish", "orders", "later", "--delay", "1m"]),
    );
    assert(delayed.visible_at, "visible_at is set by --delay");

    const [msg] = JSON.parse(await ok(url, ["consume", "orders", "--json"])) as MessageJson[];
    assertEquals(msg!.payload_text, "hello");
    assertEquals(msg!.headers, { "x-mq-trace": "t-1", "x-mq-tenant": "acme" });
    assertEquals(msg!.priority, "high");
  }));

Deno.test("ferry publish - reads stdin; -f publishes each file in order", () =>
  withLiveBroker(async ({ url }) => {
    const stdin = await ok(url, ["--json", "publish", "orders", "-"], "line one\nline two\n");
    assertEquals(JSON.parse(stdin).topic, "orders");

    const dir = await Deno.makeTempDir({ prefix: "ferry-cli-" });
    try {
      for (const n of [1, 2, 3]) await Deno.writeTextFile(`${dir}/m${n}.json`, `{"n":${n}}`);
      const human = await ferry(["publish", "orders", "-f", "m1.json", "m2.json"], {
        url,
        cwd: dir,
      });
      assertEquals(human.code, 0, human.stderr);
      const lines = human.stdout.trimEnd().split("\n");
      assertMatch(lines[0]!, /^FILE\s+ID$/);
      assertMatch(lines[1]!, new RegExp(`^m1\\.json  ${ID}$`));
      assertMatch(lines[2]!, new RegExp(`^m2\\.json  ${ID}$`));
      assertEquals(lines[3], 'Published 2 files to "orders"');
      assertEquals(human.stderr, "", "no progress bar when stderr is not a terminal");

      const json = await ferry(["--json", "publish", "orders", "-f", "m3.json", "m1.json"], {
        url,
        cwd: dir,
      });
      assertEquals(JSON.parse(json.stdout).map((a: { file: string }) => a.file), [
        "m3.json",
        "m1.json",
      ]);

      const missing = await ferry(["publish", "orders", "-f", "m1.json", "nope.json"], {
        url,
        cwd: dir,
      });
      assertEquals(missing.code, 2);
      assertEquals(missing.stderr, 'ferry: Cannot read "nope.json": no such file\n');
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
    const all = JSON.parse(await ok(url, ["--json", "consume", "orders", "--limit", "10"]));
    assertEquals(all.map((m: MessageJson) => m.payload_text), [
      "line one\nline two\n",
      '{"n":1}',
      '{"n":2}',
      '{"n":3}',
      '{"n":1}',
    ]);
  }));

Deno.test("ferry publish --batch sends each NDJSON line as a message, all or nothing", () =>
  withLiveBroker(async ({ url }) => {
    const lines = [
      '{"payload_text":"a","idempotency_key":"k-a"}',
      "",
      '{"payload":"AP8H","priority":"high","headers":{"X-MQ-Src":"file"}}',
      '{"payload_text":"c"}',
    ].join("\n");
    const text = await ok(url, ["publish", "orders", "--batch", "-", "--ttl", "1h"], lines);
    assertEquals(text, 'Published 3 messages to "orders"\n');
    const json = JSON.parse(
      await ok(url, ["--json", "publish", "orders", "--batch", "-"], lines.split("\n")[0]),
    ) as (PublishAnswer & { line: number })[];
    assertEquals(json.map((a) => [a.line, a.deduplicated]), [[1, true]]);
    const got = JSON.parse(await ok(url, ["--json", "consume", "orders", "--limit", "10"]));
    assertEquals(got.map((m: MessageJson) => m.payload), ["AP8H", "YQ==", "Yw=="]);
    assert(got.every((m: MessageJson) => m.expires_at), "--ttl applies to every line");
    assertEquals(got[0].headers, { "x-mq-src": "file" });

    const bad = await ferry(["publish", "orders", "--batch", "-"], {
      url,
      stdin: '{"payload_text":"x"}\n{"payload_text":"y","ttl":"soon"}\n',
    });
    assertEquals(bad.code, 1);
    assertMatch(bad.stderr, /lines 1-2 .*messages\[1\]\.ttl/);
    const usageErr = await ferry(["publish", "orders", "--batch", "-"], { url, stdin: "[1]" });
    assertEquals([usageErr.code, usageErr.stderr], [
      2,
      'ferry: Line 1: expected a JSON object like {"payload_text":"…"}\n',
    ]);
    const empty = await ferry(["--json", "consume", "orders"], { url });
    assertEquals([empty.code, JSON.parse(empty.stdout)], [1, []], "nothing of a refused batch");
  }));

Deno.test("ferry publish --broadcast reaches the waiting consumers only", () =>
  withLiveBroker(async ({ url }) => {
    assertEquals(
      await ok(url, ["publish", "orders", "ping", "--broadcast"]),
      'Broadcast to 0 waiting consumers of "orders"\n',
    );
    const json = JSON.parse(await ok(url, ["--json", "publish", "orders", "ping", "--broadcast"]));
    assertEquals(json, { broadcast: true, delivered_to: 0 });
  }));

Deno.test("ferry consume --no-ack leaves messages in flight; ferry ack acks them", () =>
  withLiveBroker(async ({ url }) => {
    // A group's first consume creates it; it gets what is published from then on.
    await ok(url, ["publish", "jobs", "before"]);
    assertEquals((await ferry(["consume", "jobs", "--group", "g1"], { url })).code, 1);
    for (const p of ["a", "b", "c"]) await ok(url, ["publish", "jobs", p]);
    const taken = JSON.parse(
      await ok(url, ["--json", "consume", "jobs", "--limit", "2", "--no-ack", "--group", "g1"]),
    ) as MessageJson[];
    assertEquals(taken.map((m) => m.payload_text), ["a", "b"]);
    const ids = taken.map((m) => m.id);
    const unknown = "01930000-0000-7000-8000-000000000000";
    const notHere = await ferry(["ack", "jobs", unknown, "--group", "g1"], { url });
    assertEquals([notHere.code, notHere.stdout], [1, ""]);
    assertEquals(
      notHere.stderr,
      `ferry: Not in flight in "jobs" group "g1": ${unknown}; check the topic, --group and the ` +
        `id (a lease that ran out puts a message back)\n`,
    );
    assertEquals(await ok(url, ["ack", "jobs", ...ids, "--group", "g1"]), "Acked 2 messages\n");
    const again = await ferry(["--json", "ack", "jobs", ids[0]!, "--group", "g1"], { url });
    assertEquals(again.code, 1);
    assertEquals(JSON.parse(again.stdout), { acked: 0, not_found: [ids[0]] });
    const groups = await ok(url, ["groups", "jobs"]);
    assertMatch(groups, /^GROUP\s+CREATED\ng1\s+(just now|\d+s ago)\n$/);
  }));

Deno.test("ferry requeue gives a message back, and the third time dead-letters it; redrive", () =>
  withLiveBroker(async ({ url }) => {
    await ok(url, ["publish", "jobs", "poison"]);
    for (let i = 1; i <= 3; i++) {
      const [m] = JSON.parse(await ok(url, ["--json", "consume", "jobs", "--no-ack"]));
      const out = await ok(url, ["requeue", "jobs", m.id, "--reason", "bad input"]);
      if (i < 3) assertEquals(out, `Requeued ${m.id} in "jobs" (retry ${i})\n`);
      else assertEquals(out, `Dead-lettered ${m.id} to "jobs.dlq" after 3 retries\n`);
    }
    const [dead] = JSON.parse(await ok(url, ["--json", "peek", "jobs.dlq"])) as MessageJson[];
    assertEquals([dead!.payload_text, dead!.reason], ["poison", "bad input"]);
    assertMatch(await ok(url, ["peek", "jobs.dlq"]), /reason: bad input\npoison\n$/);
    assertEquals(
      await ok(url, ["redrive", "jobs"]),
      'Moved 1 message from "jobs.dlq" back to "jobs"\n',
    );
    const missing = await ferry(["requeue", "jobs", "0193-nope"], { url });
    assertEquals(missing.code, 1);
    assertMatch(missing.stderr, /^ferry: .*0193-nope.*\n$/);
  }));

Deno.test("ferry peek shows messages without taking them", () =>
  withLiveBroker(async ({ url }) => {
    assertEquals(await ok(url, ["peek", "orders"]), 'No messages in "orders"\n');
    await ok(url, ["publish", "orders", "one"]);
    await ok(url, ["publish", "orders", "two"]);
    const shown = await ok(url, ["peek", "orders"]);
    assertMatch(shown, new RegExp(`^${ID}  orders  .*\\none\\n\\n${ID}  orders  .*\\ntwo\\n$`));
    const json = JSON.parse(await ok(url, ["peek", "orders", "--json"])) as MessageJson[];
    assertEquals(json.map((m) => m.payload_text), ["one", "two"]);
  }));

Deno.test("ferry consume --wait takes a message published while it waits", () =>
  withLiveBroker(async ({ url }) => {
    const waiting = ferry(["--json", "consume", "late", "--wait", "20s"], { url });
    await ok(url, ["publish", "late", "here"]);
    const r = await waiting;
    assertEquals(r.code, 0, r.stderr);
    assertEquals(JSON.parse(r.stdout)[0].payload_text, "here");
  }));

/**
 * Resolves once a long poll parks on the broker: on a topic (`add`) or, for a topic that does
 * not exist yet, on its name (`waitForTopic`).
 */
function nextParked(broker: Broker): Promise<void> {
  const consumers = broker.consumers;
  const { add, waitForTopic } = consumers;
  return new Promise((resolve) => {
    const parked = () => {
      consumers.add = add;
      consumers.waitForTopic = waitForTopic;
      resolve();
    };
    consumers.add = (...args) => {
      const remove = add.apply(consumers, args);
      parked();
      return remove;
    };
    consumers.waitForTopic = (...args) => {
      const taken = waitForTopic.apply(consumers, args);
      parked();
      return taken;
    };
  });
}

Deno.test("ferry consume --wait exits 130 on Ctrl-C, says it was interrupted, and takes nothing", () =>
  withLiveBroker(async ({ url, broker }) => {
    const parked = nextParked(broker);
    const waiting = spawnFerry(["consume", "lp", "--wait", "30s"], { url });
    await parked;
    assertEquals(await waiting.stop("SIGINT"), 130);
    assertEquals(waiting.out, []);
    assertEquals(waiting.err, [
      'ferry: Interrupted while waiting for a message in "lp"; nothing was taken',
    ]);
    await ok(url, ["publish", "lp", "after"]);
    assertEquals(JSON.parse(await ok(url, ["--json", "consume", "lp"]))[0].payload_text, "after");
  }));

Deno.test("ferry consume --follow prints one JSON line per message and acks until Ctrl-C", () =>
  withLiveBroker(async ({ url }) => {
    const follow = spawnFerry(["--json", "consume", "feed", "--follow"], { url });
    try {
      for (const p of ["1", "2", "3"]) await ok(url, ["publish", "feed", p]);
      await follow.until(() => follow.out.length >= 3, "three messages");
    } finally {
      assertEquals(await follow.stop("SIGINT"), 0);
    }
    assertEquals(follow.out.map((l) => JSON.parse(l).payload_text), ["1", "2", "3"]);
    const left = await ferry(["consume", "feed"], { url });
    assertEquals(left.code, 1, "every message was acked");
  }));

Deno.test("ferry publish --delay and --ttl print the delay and lifetime asked for", () =>
  withLiveBroker(async ({ url }) => {
    const out = await ok(url, ["publish", "orders", "later", "--delay", "2s", "--ttl", "1h"]);
    assertMatch(
      out,
      new RegExp(`^Published ${ID} to "orders"  \\(visible in 2s, expires in 1h\\)\\n$`),
    );
    const long = await ok(url, ["publish", "orders", "later", "--delay", "90s"]);
    assertMatch(long, /\(visible in 1m 30s\)\n$/);
  }));
