import { assertEquals } from "../_support/assert.ts";
import {
  batchAnswerText,
  isoTime,
  messageFrameText,
  messageJson,
  messagesText,
  messageText,
  publishedJson,
  publishedText,
} from "../../routes/wire.ts";
import type { WsServerFrame } from "../../protocol/wire.ts";
import { Broker, type Handed, type Published } from "../../lib/broker.ts";
import { defaultConfig } from "../../lib/config.ts";

Deno.test("isoTime() equals Date.prototype.toISOString for any millisecond", () => {
  const samples = [0, 1, 9, 10, 99, 100, 999, 1000, 1_700_000_000_000, 1_700_000_000_007];
  for (let i = 0; i < 2000; i++) samples.push(Math.floor(Math.random() * 4_102_444_800_000));
  for (const ms of [...samples, ...samples.map((m) => m + 1)]) {
    assertEquals(isoTime(ms), new Date(ms).toISOString(), `at ${ms}`);
  }
});

Deno.test("messageText() and messagesText() write exactly JSON.stringify of messageJson()", async () => {
  const dir = await Deno.makeTempDir();
  let now = 1_700_000_000_123;
  const broker = await Broker.open(defaultConfig({ dataDir: dir }), { clock: () => now });
  try {
    const enc = new TextEncoder();
    const payloads = [
      enc.encode("plain"),
      enc.encode('quote " backslash \\ newline \n tab \t nul \u0000 é 😀 \u2028'),
      new Uint8Array([0xff, 0xfe, 0x00, 0x80]), // not UTF-8: no payload_text
      new Uint8Array(5000).fill(0x41),
    ];
    const headers = [undefined, ["x-mq-k", 'v "q"', "content-type", "text/plain"], [
      "content-type",
      "a/b",
    ]];
    await broker.createGroup("t-1", "g-1");
    for (const [i, p] of payloads.entries()) {
      await broker.publish("t-1", p, {
        headers: headers[i % headers.length],
        ttlMs: i % 2 ? 60_000 : undefined,
        priority: i % 3,
      });
    }
    const check = (hs: Handed[]) => {
      assertEquals(messagesText(hs), JSON.stringify(hs.map(messageJson)));
      for (const h of hs) {
        assertEquals(messageText(h), JSON.stringify(messageJson(h)));
        const frame: WsServerFrame = {
          type: "message",
          subscription: "t-*",
          message: messageJson(h),
        };
        assertEquals(messageFrameText("t-*", h), JSON.stringify(frame));
      }
      return hs.length;
    };
    assertEquals(await broker.consume("t-1", { limit: 10, group: "g-1" }, check), 4);
    // Requeued with a reason: retry_count, reason and group all show.
    const [first] = await broker.consume("t-1", { limit: 1, peek: true }, (hs) => hs);
    await broker.requeue("t-1", "g-1", first!.msg.id, { reason: 'bad "input"' });
    now += 1;
    assertEquals(await broker.consume("t-1", { limit: 10, group: "g-1" }, check), 1);
    assertEquals(await broker.consume("t-1", { limit: 10 }, check), 4);
    assertEquals(messagesText([]), "[]");
  } finally {
    await broker.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("publishedText() and batchAnswerText() write what JSON.stringify of the answers does", () => {
  const t = Date.UTC(2026, 10, 23, 1, 2, 3, 45);
  const results: Published[] = [
    {
      id: "0190b8a2-0000-7000-8000-000000000001",
      topic: "orders.eu-1_x",
      timestamp: t,
      priority: 1,
      deduplicated: false,
      visibleAt: 0,
      expiresAt: 0,
    },
    {
      id: "0190b8a2-0000-7000-8000-000000000002",
      topic: "orders.eu-1_x",
      timestamp: t + 7,
      priority: 0,
      deduplicated: false,
      visibleAt: t + 5_000,
      expiresAt: t + 60_000,
    },
    {
      id: "0190b8a2-0000-7000-8000-000000000001",
      topic: "orders.eu-1_x",
      timestamp: t - 999,
      priority: 2,
      deduplicated: true,
      visibleAt: 0,
      expiresAt: t + 1,
    },
  ];
  for (const p of results) assertEquals(publishedText(p), JSON.stringify(publishedJson(p)));
  for (const list of [results, results.slice(0, 1), []]) {
    assertEquals(batchAnswerText(list), JSON.stringify({ messages: list.map(publishedJson) }));
  }
});
