/**
 * The client side of bench row 3c (`tests/bench/load.ts`): drains a filled topic through the
 * client library's `messages()` loop, as its own process.
 *
 *   deno run -A tests/bench/client_drain.ts URL TOPIC COUNT LOOPS BATCH
 *     runs LOOPS concurrent `ferry.messages(TOPIC, { batch: BATCH })` loops on one client until
 *     COUNT messages have been handled, then stops them (which acks the last ones) and prints one
 *     JSON line: {"taken","seconds","rate","acks","polls"}, timed from the first poll to the
 *     loops' end.
 */

import { Ferry } from "../../clients/ts/mod.ts";

const [url, topic, count, loops, batch] = Deno.args;
if (!url || !topic || !count || !loops || !batch) {
  console.error("usage: client_drain.ts URL TOPIC COUNT LOOPS BATCH");
  Deno.exit(2);
}
const want = Number(count);
let acks = 0, polls = 0;
const ferry = new Ferry({
  url,
  fetch: (input, init) => {
    const path = new URL(String(input)).pathname;
    if (path.startsWith("/ack/")) acks++;
    else if (path.startsWith("/consume/")) polls++;
    return fetch(input, init);
  },
});
const ac = new AbortController();
let taken = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(loops) }, async () => {
  const loop = ferry.messages(topic, { batch: Number(batch), wait: "1s", signal: ac.signal });
  for await (const _ of loop) {
    if (++taken >= want) ac.abort();
  }
}));
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ taken, seconds, rate: taken / seconds, acks, polls }));
