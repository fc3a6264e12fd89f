/**
 * `ferry.messages()` against a real broker on the real clock: batch acks, requeues with the
 * error's message, leaving the loop early, messages settled by hand, leases kept alive past their
 * visibility, stopping on an AbortSignal, and failures waited out or surfaced.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { settle } from "../../_support/http.ts";
import { startProxy } from "../../_support/proxy.ts";
import { withLiveBroker } from "../../_support/server.ts";
import { within } from "../../_support/wait.ts";
import {
  Ferry,
  FerryConnectionError,
  FerryError,
  LEFT_EARLY_REASON,
  type Message,
} from "../../../clients/ts/mod.ts";

/** A client that records `METHOD path` of each request. */
function recordingFerry(url: string) {
  const calls: string[] = [];
  const ferry = new Ferry({
    url,
    fetch: (input, init) => {
      calls.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    },
  });
  return { ferry, calls };
}

Deno.test("messages(): for await acks what the body finished, in one batch ack per batch", async () => {
  await withLiveBroker(async (b) => {
    const { ferry, calls } = recordingFerry(b.url);
    for (let i = 0; i < 5; i++) await ferry.publish("jobs", `j${i}`);
    const ac = new AbortController();
    const seen: string[] = [];
    for await (const msg of ferry.messages("jobs", { batch: 5, signal: ac.signal })) {
      seen.push(msg.payload_text!);
      if (seen.length === 5) ac.abort(); // stop after this one; it is finished, so acked
    }
    assertEquals(seen, ["j0", "j1", "j2", "j3", "j4"]);
    assertEquals(calls.filter((c) => c.startsWith("POST /ack")), ["POST /ack/jobs"]);
    const s = (await ferry.stats()).topics.jobs!;
    assertEquals([s.depth, s.in_flight], [0, 0]);
  });
});

Deno.test("messages().run(): a handler that throws requeues with the error's message, and the loop goes on", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    await ferry.createGroup("work", "g");
    for (const p of ["a", "b", "c"]) await ferry.publish("work", p);
    const ac = new AbortController();
    const seen: string[] = [];
    const errors: string[] = [];
    await within(
      ferry.messages("work", {
        group: "g",
        signal: ac.signal,
        onError: (e, m) => errors.push(`${m?.payload_text}: ${(e as Error).message}`),
      }).run((msg: Message) => {
        seen.push(`${msg.payload_text}${msg.retry_count}${msg.reason ? ` (${msg.reason})` : ""}`);
        if (msg.payload_text === "b" && msg.retry_count === 0) throw new Error("boom on b");
        if (seen.length === 4) ac.abort();
      }),
      10_000,
      "the loop",
    );
    assertEquals(seen, ["a0", "b0", "c0", "b1 (boom on b)"]);
    assertEquals(errors, ["b: boom on b"]);
    assertEquals((await ferry.stats()).topics.work!.groups.g!.in_flight, 0);
  });
});

Deno.test("messages(): leaving a for await early requeues the message in hand and releases the prefetched", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    for (const p of ["x", "y", "z"]) await ferry.publish("early", p);
    const e = await (async () => {
      for await (const msg of ferry.messages("early", { batch: 3, visibility: "1h" })) {
        throw new Error(`cannot handle ${msg.payload_text}`);
      }
    })().catch((e) => e);
    assertEquals((e as Error).message, "cannot handle x", "the body's exception ends the loop");
    // Ready again at once (not after the 1 h lease): the one in hand with one more attempt and
    // a reason, the unstarted ones released with no attempt counted.
    const back = await ferry.consume("early", { limit: 3 });
    assertEquals(back.map((m) => [m.payload_text, m.retry_count, m.reason]), [
      ["x", 1, LEFT_EARLY_REASON],
      ["y", 0, undefined],
      ["z", 0, undefined],
    ]);
  });
});

Deno.test("messages(): messages acked or requeued by hand in the body are left alone by the loop", async () => {
  await withLiveBroker(async (b) => {
    const { ferry, calls } = recordingFerry(b.url);
    await ferry.publish("hand", "retry me");
    await ferry.publish("hand", "keep me");
    let kept = "";
    for await (const msg of ferry.messages("hand", { batch: 2 })) {
      if (msg.payload_text === "retry me") {
        await ferry.requeue(msg, { reason: "by hand", delay: "1h" });
      } else {
        await ferry.ack("hand", kept = msg.id);
        break; // acked already: nothing to give back
      }
    }
    assertEquals(
      calls.filter((c) => /^POST \/(ack|requeue)/.test(c)),
      ["POST /requeue", `POST /ack/hand/${kept}`],
      "no batch ack, no requeue from the loop",
    );
    const s = (await ferry.stats()).topics.hand!;
    assertEquals([s.depth, s.in_flight, s.delayed], [0, 0, 1], "only the requeued one is left");
  });
});

Deno.test("messages(): touches keep a 1 s lease alive while the body works for 2 s", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    await ferry.publish("slow", "long job");
    const ac = new AbortController();
    for await (const msg of ferry.messages("slow", { visibility: "1s", signal: ac.signal })) {
      // The work: a rival consumer's 2 s long poll, which an ended lease would feed.
      const rival = await ferry.consume("slow", { timeout: "2s" });
      assertEquals(rival, [], "the lease never ended");
      assertEquals(msg.retry_count, 0);
      ac.abort();
    }
    const s = (await ferry.stats()).topics.slow!;
    assertEquals([s.depth, s.in_flight], [0, 0], "acked once the body finished");
  });
});

Deno.test("messages(): an abort ends a waiting long poll at once, and prefetched messages are not stuck until lease end", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const ac = new AbortController();
    const idle = (async () => {
      for await (const _ of ferry.messages("quiet", { wait: "20s", signal: ac.signal })) {
        throw new Error("nothing was published");
      }
    })();
    await settle(b); // the loop's long poll is parked
    const t0 = performance.now();
    ac.abort();
    await within(idle, 1_000, "the loop's end after abort");
    assert(performance.now() - t0 < 1_000);

    for (const p of ["1", "2", "3", "4"]) await ferry.publish("busy", p);
    const stop = new AbortController();
    const seen: string[] = [];
    const loop = ferry.messages("busy", { batch: 4, visibility: "1h", signal: stop.signal });
    for await (const msg of loop) {
      seen.push(msg.payload_text!);
      stop.abort();
    }
    assertEquals(seen, ["1"]);
    const back = await ferry.consume("busy", { limit: 10 });
    assertEquals(back.map((m) => [m.payload_text, m.retry_count]), [
      ["2", 0],
      ["3", 0],
      ["4", 0],
    ]);
  });
});

Deno.test("messages(): a refusal ends the loop with its FerryError; a lost broker is waited out", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    const bad = await (async () => {
      for await (const _ of ferry.messages("bad name!")) return;
    })().catch((e) => e);
    assert(bad instanceof FerryError);
    assertEquals([bad.status, bad.code], [400, "invalid_name"]);

    const proxy = startProxy(b.url);
    try {
      proxy.down = true;
      const heard: unknown[] = [];
      const patient = new Ferry({ url: proxy.url, retries: 0 });
      const ac = new AbortController();
      const loop = (async () => {
        for await (
          const msg of patient.messages("later", {
            signal: ac.signal,
            onError: (e) => {
              heard.push(e);
              proxy.down = false; // the broker is back for the next try
            },
          })
        ) {
          ac.abort();
          return msg.payload_text;
        }
      })();
      await ferry.publish("later", "made it");
      assertEquals(await within(loop, 10_000, "the loop"), "made it");
      assert(heard[0] instanceof FerryConnectionError, String(heard[0]));
    } finally {
      await proxy.close();
    }
  });
});

/** An HTTP front that forwards to `target` until `hang` is set, then holds every request. */
function hangingFront(target: string) {
  let unblock = () => {};
  const blocked = new Promise<void>((r) => unblock = r);
  const front = {
    hang: false,
    held: 0,
    url: "",
    close: async () => {
      unblock();
      await server.shutdown();
    },
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const u = new URL(req.url);
    const body = req.body ? await req.arrayBuffer() : undefined;
    if (front.hang) {
      front.held++;
      await blocked;
      return new Response(null, { status: 503 });
    }
    return await fetch(target + u.pathname + u.search, {
      method: req.method,
      headers: req.headers,
      body,
    });
  });
  front.url = `http://127.0.0.1:${server.addr.port}`;
  return front;
}

Deno.test("messages().run(): a stop against a hung broker ends within shutdownTimeoutMs and reports what failed", async () => {
  await withLiveBroker(async (b) => {
    const front = hangingFront(b.url);
    try {
      const ferry = new Ferry({ url: front.url, timeoutMs: 10_000, retries: 0 });
      for (const p of ["1", "2", "3", "4", "5"]) await ferry.publish("hung", p);
      const stop = new AbortController();
      let abortedAtStop: boolean | undefined;
      let stoppedAt = 0;
      const out = await within(
        ferry.messages("hung", {
          batch: 5,
          visibility: "1h",
          signal: stop.signal,
          shutdownTimeoutMs: 400,
          onError: () => {},
        }).run(async (_msg, signal) => {
          front.hang = true; // the broker stops answering
          stop.abort();
          stoppedAt = performance.now();
          abortedAtStop = signal.aborted; // the stop is not the handler's abort
          await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
        }).then(() => undefined, (e) => e),
        3_000,
        "the loop's end",
      );
      assertEquals(abortedAtStop, false, "the handler's signal is not the stop signal");
      const took = performance.now() - stoppedAt;
      assert(took >= 400 && took < 1_500, `stopped ${took} ms after the abort`);
      assert(out instanceof AggregateError, `the failed shutdown work is reported: ${out}`);
      assertEquals(out.errors.length, 5, "one ack and four releases failed");
      assertEquals(front.held, 5, "sent together: the ack and the four releases at once");
    } finally {
      await front.close();
    }
  });
});

Deno.test("messages(): leases are kept by one batch touch per check; no visibility means the topic's lease", async () => {
  await withLiveBroker(async (b) => {
    const { ferry, calls } = recordingFerry(b.url);
    await ferry.createTopic("lease", { visibility: "1s" });
    for (const p of ["a", "b", "c", "d"]) await ferry.publish("lease", p);
    const ac = new AbortController();
    const seen: string[] = [];
    for await (const msg of ferry.messages("lease", { batch: 4, signal: ac.signal })) {
      seen.push(msg.payload_text!);
      if (seen.length > 1) continue;
      // The lease is the topic's 1 s, not 30 s: the broker says when it ends.
      const [held] = await ferry.inFlight("lease", { limit: 1 });
      const left = Date.parse(held!.lease_ends_at) - Date.now();
      assert(left <= 1_100, `the loop asked for the topic's 1 s lease, got ${left} ms`);
      // The work: a rival's 2 s long poll, which an ended lease of any of the four would feed.
      assertEquals(await ferry.consume("lease", { timeout: "2s" }), [], "no lease ended");
      ac.abort();
    }
    const touches = calls.filter((c) => c.startsWith("POST /touch"));
    assert(touches.length >= 2, `touched: ${touches.join(", ")}`);
    assertEquals(touches.filter((c) => c !== "POST /touch/lease"), [], "batch touches only");
  });
});
