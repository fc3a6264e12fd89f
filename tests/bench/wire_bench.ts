/**
 * Building a consume's answer: the 100-message JSON text as routes/consume.ts writes it
 * (messagesText) next to JSON.stringify of the message objects it replaced.
 * `deno bench -A tests/bench/wire_bench.ts`
 */

import { Broker, type Handed } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";
import { messageJson, messagesText } from "../../routes/wire.ts";

const broker = await Broker.open(defaultConfig({ dataDir: ":memory:", maxQueue: 1e9 }), {
  tick: false,
});
const payload = new Uint8Array(1024).fill(120);
for (let i = 0; i < 100; i++) {
  await broker.publish("wire", payload.slice(), {
    headers: i % 2 ? ["x-mq-trace", `t-${i}`] : undefined,
  });
}
const handed: Handed[] = await broker.consume("wire", { limit: 100, peek: true }, (h) => h);

Deno.bench("100 × 1 KiB answer: JSON.stringify(messageJson)", {
  group: "answer",
  baseline: true,
}, () => {
  JSON.stringify(handed.map(messageJson));
});

Deno.bench("100 × 1 KiB answer: messagesText", { group: "answer" }, () => {
  messagesText(handed);
});
