/**
 * The client's lifecycle against a real broker: `ferry.close()` ends its consumer loops,
 * subscriptions and event streams and refuses later calls; `subscribe().close()` waits for the
 * handlers it runs.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { settle } from "../../_support/http.ts";
import { withLiveBroker } from "../../_support/server.ts";
import { within } from "../../_support/wait.ts";
import { Ferry, FerryClosedError, FerryError } from "../../../clients/ts/mod.ts";

Deno.test("ferry.close() ends loops, subscriptions and streams; later calls reject with closed", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    await ferry.publish("life", "held");
    const loop = (async () => {
      const seen: string[] = [];
      for await (const m of ferry.messages("life", { batch: 5, visibility: "1h" })) {
        seen.push(m.payload_text!);
      }
      return seen;
    })();
    const sub = ferry.subscribe("life", () => {});
    await sub.ready;
    const streamed = (async () => {
      for await (const _ of ferry.stream("life")) { /* until closed */ }
      return "ended";
    })();
    await settle(b); // the loop's next long poll is parked

    await within(ferry.close(), 5_000, "close()");
    assertEquals(await within(loop, 1_000, "the loop's end"), ["held"]);
    assertEquals(await within(streamed, 1_000, "the stream's end"), "ended");
    const s = (await new Ferry({ url: b.url }).stats()).topics.life!;
    assertEquals([s.depth, s.in_flight], [0, 0], "the finished message was acked on the way out");

    const e = await ferry.publish("life", "late").catch((e) => e);
    assert(e instanceof FerryClosedError && e instanceof FerryError, String(e));
    assertEquals([e.code, e.status], ["closed", 0]);
    let thrown: unknown;
    try {
      ferry.subscribe("life", () => {});
    } catch (e) {
      thrown = e;
    }
    assert(thrown instanceof FerryClosedError, String(thrown));
    await ferry.close(); // again: resolves
  });
});

Deno.test("subscribe().close() resolves once the socket is closed and its handlers have returned", async () => {
  await withLiveBroker(async (b) => {
    const ferry = new Ferry({ url: b.url });
    let started = () => {};
    const running = new Promise<void>((r) => started = r);
    let finished = false;
    const sub = ferry.subscribe("slow-handler", async () => {
      started();
      await new Promise((r) => setTimeout(r, 300));
      finished = true;
    }, { group: "" });
    await sub.ready;
    await ferry.publish("slow-handler", "x");
    await within(running, 5_000, "the handler's start");
    await sub.close();
    assert(finished, "close() waited for the handler");
    // Its ack went over HTTP, the socket being closed.
    const s = (await ferry.stats()).topics["slow-handler"]!;
    assertEquals([s.depth, s.in_flight], [0, 0]);
    await ferry.close();
  });
});
