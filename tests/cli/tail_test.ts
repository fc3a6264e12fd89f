/**
 * `ferry tail` as a real subprocess: live messages in human and --json mode, --filter, and a
 * child broker SIGKILLed and restarted on the same port and data dir under it: every message
 * exactly once and in order, or a note on stderr when the broker no longer holds what was missed.
 */

import { nextSubscriber, startBroker } from "../_support/server.ts";
import { type ChildBroker, start, stop, withDataDir } from "../_support/child.ts";
import { ferry, type RunningFerry, spawnFerry } from "../_support/cli.ts";
import { assertEquals, assertMatch } from "../_support/assert.ts";

/** Resolves once a child broker (run with BROKER_ACCESS_LOG) has answered on `route`. */
async function answered(child: ChildBroker, route: string, from = 0): Promise<void> {
  while (true) {
    const line = await child.logged("request", from);
    from = child.logs.indexOf(line, from) + 1;
    if (JSON.parse(line).route === route) return;
  }
}

/** Resolves once a child broker has opened a stream. */
function streamOpened(child: ChildBroker): Promise<void> {
  return answered(child, "/stream/:topic");
}

async function publish(url: string, topic: string, body: string): Promise<void> {
  const res = await fetch(`${url}/publish/${topic}`, { method: "POST", body });
  await res.body?.cancel();
  if (res.status !== 201) throw new Error(`publish ${body}: ${res.status}`);
}

const payloads = (t: RunningFerry) => t.out.map((l) => JSON.parse(l).payload_text);

Deno.test("ferry tail prints each message as it arrives, in JSON lines or as blocks", async () => {
  const b = await startBroker();
  const opened = nextSubscriber(b.broker, "orders");
  const json = spawnFerry(["--json", "tail", "orders"], { url: b.url });
  try {
    await opened;
    const openedAgain = nextSubscriber(b.broker, "orders");
    const human = spawnFerry(["tail", "orders"], { url: b.url });
    try {
      await openedAgain;
      await publish(b.url, "orders", "one");
      await publish(b.url, "orders", '{"sku":"a1"}');
      await json.until(() => json.out.length >= 2, "two JSON lines");
      assertEquals(payloads(json), ["one", '{"sku":"a1"}']);
      await human.until(() => human.out.length >= 6, "two blocks");
      assertMatch(human.out[0]!, /^\S{36} {2}orders {2}(just now|\ds ago)$/);
      assertEquals([human.out[1], human.out[2], human.out[4]], ["one", "", '{"sku":"a1"}']);
    } finally {
      assertEquals(await human.stop("SIGINT"), 0);
    }
  } finally {
    assertEquals(await json.stop("SIGINT"), 0);
    await b.close();
  }
  assertEquals(json.err, [], "nothing on stderr");
});

Deno.test("ferry tail --filter key=value shows only matching JSON payloads", async () => {
  const b = await startBroker();
  const opened = nextSubscriber(b.broker, "orders");
  const tail = spawnFerry(["--json", "tail", "orders", "--filter", "sku=a1"], { url: b.url });
  try {
    await opened;
    for (const body of ['{"sku":"a1","n":1}', '{"sku":"b2"}', "plain", '{"sku":"a1","n":2}']) {
      await publish(b.url, "orders", body);
    }
    await tail.until(() => tail.out.length >= 2, "two matching messages");
    assertEquals(payloads(tail), ['{"sku":"a1","n":1}', '{"sku":"a1","n":2}']);
  } finally {
    assertEquals(await tail.stop("SIGINT"), 0);
    await b.close();
  }
  const bad = await ferry(["tail", "orders", "--filter", "=x"], { url: b.url });
  assertEquals([bad.code, bad.stderr], [
    2,
    'ferry: Invalid --filter "=x": expected key=value or key\n',
  ]);
});

const LOGGED = { BROKER_ACCESS_LOG: "true", BROKER_LOG_LEVEL: "info" };

Deno.test({
  name: "ferry tail across a broker SIGKILL and restart: every message exactly once, in order",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let b = await start(dir, LOGGED);
      const port = b.port;
      const tail = spawnFerry(["--json", "tail", "orders"], { url: b.url });
      try {
        await streamOpened(b);
        for (let i = 1; i <= 5; i++) await publish(b.url, "orders", `m${i}`);
        await tail.until(() => tail.out.length >= 5, "five messages before the kill");
        await stop(b, "SIGKILL");
        await tail.until(() => tail.err.some((l) => l.includes("lost the stream")), "a lost note");
        b = await start(dir, LOGGED, ["--port", String(port)]);
        await streamOpened(b); // the tail's own reconnect, with Last-Event-ID
        for (let i = 6; i <= 10; i++) await publish(b.url, "orders", `m${i}`);
        await tail.until(() => tail.out.length >= 10, "ten messages");
      } finally {
        assertEquals(await tail.stop("SIGINT"), 0);
      }
      assertEquals(payloads(tail), Array.from({ length: 10 }, (_, i) => `m${i + 1}`));
      assertEquals(tail.err.filter((l) => l.includes("missed")), [], "no reset");
      assertMatch(tail.err[0]!, /^ferry: lost the stream of "orders" \(.*\); reconnecting$/);
      assertMatch(tail.err.at(-1)!, /^ferry: stream of "orders" is back \(event \d+\)$/);
    }),
});

Deno.test({
  name:
    "ferry tail across a graceful restart prints what was published meanwhile, with one calm note",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let b = await start(dir, LOGGED);
      const port = b.port;
      const tail = spawnFerry(["--json", "tail", "orders"], { url: b.url });
      try {
        await streamOpened(b);
        for (const m of ["m1", "m2", "m3"]) await publish(b.url, "orders", m);
        await tail.until(() => tail.out.length >= 3, "three messages before the restart");
        await stop(b, "SIGTERM"); // the broker says it is stopping, and stops
        // Stored while the tail waits to reconnect (on a port it does not know, so surely before
        // it reconnects): the topic still holds them after the restart.
        const side = await start(dir, LOGGED);
        for (const m of ["m4", "m5", "m6"]) await publish(side.url, "orders", m);
        await stop(side, "SIGTERM");
        b = await start(dir, LOGGED, ["--port", String(port)]);
        await tail.until(() => tail.out.length >= 6, "six messages", 15_000);
      } finally {
        assertEquals(await tail.stop("SIGINT"), 0);
      }
      assertEquals(payloads(tail), ["m1", "m2", "m3", "m4", "m5", "m6"]);
      assertEquals(tail.err.filter((l) => /bug|missed|lost/.test(l)), [], "no alarm");
      assertEquals(tail.err, ["ferry: the broker is restarting; reconnecting…"]);
    }),
});

Deno.test({
  name: "ferry tail says on stderr when the broker no longer holds what it missed",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let b = await start(dir, LOGGED);
      const port = b.port;
      const tail = spawnFerry(["--json", "tail", "orders"], { url: b.url });
      try {
        await streamOpened(b);
        await publish(b.url, "orders", "a1");
        await publish(b.url, "orders", "a2");
        await tail.until(() => tail.out.length >= 2, "two messages");
        await stop(b, "SIGKILL");
        await tail.until(() => tail.err.some((l) => l.includes("lost the stream")), "a lost note");
        // Stored and consumed while the tail is away, on a port it does not know: gone before
        // it can resume.
        const side = await start(dir, LOGGED);
        for (const m of ["b1", "b2", "b3"]) await publish(side.url, "orders", m);
        const gone = await fetch(`${side.url}/consume/orders?limit=10&auto_ack=true`);
        assertEquals((await gone.json()).length, 5);
        await stop(side, "SIGTERM");
        b = await start(dir, LOGGED, ["--port", String(port)]);
        await streamOpened(b);
        await tail.until(() => tail.err.some((l) => l.includes("missed")), "a reset note");
        await publish(b.url, "orders", "c1");
        await tail.until(() => tail.out.length >= 3, "the message after the reset");
      } finally {
        assertEquals(await tail.stop("SIGINT"), 0);
      }
      assertEquals(payloads(tail), ["a1", "a2", "c1"]);
      assertMatch(
        tail.err.find((l) => l.includes("missed"))!,
        /^ferry: missed messages of "orders": 3 messages after \d+ no longer held; data was missed$/,
      );
    }),
});

Deno.test({
  name: "ferry consume --follow waits for a restarted broker and goes on",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let b = await start(dir, LOGGED);
      const port = b.port;
      const follow = spawnFerry(["--json", "consume", "feed", "--follow"], { url: b.url });
      try {
        await publish(b.url, "feed", "m1");
        await follow.until(() => follow.out.length >= 1, "the first message");
        await answered(b, "/ack/:topic"); // acked before the kill, so it does not come back
        await stop(b, "SIGKILL");
        await follow.until(() => follow.err.some((l) => l.includes("trying again")), "a lost note");
        b = await start(dir, LOGGED, ["--port", String(port)]);
        await publish(b.url, "feed", "m2");
        await follow.until(() => follow.out.length >= 2, "the message after the restart");
      } finally {
        assertEquals(await follow.stop("SIGINT"), 0);
      }
      assertEquals(payloads(follow), ["m1", "m2"]);
      // (The ack of m1 may lose its answer to the kill: a notice, and the broker has it anyway.)
      const lost = follow.err.filter((l) => l.includes("trying again"));
      assertEquals(lost[0], 'ferry: lost "feed" (connection refused); trying again in 1s');
      assertEquals(follow.err.at(-1), 'ferry: consuming "feed" again');
    }),
});
