/**
 * BROKER_WORKERS=2 through a real process (supervisor.ts, worker.ts): requests land on either
 * worker, each topic lives on one, and a client cannot tell.
 */

import { assert, assertEquals } from "./_support/assert.ts";
import { logLines, start, stop, withDataDir } from "./_support/child.ts";
import { shardOf } from "../lib/shard.ts";

const WORKERS = { BROKER_WORKERS: "2" };

/** `n` topic names, at least one owned by each of two workers. */
function topics(n: number): string[] {
  const names = Array.from({ length: n }, (_, i) => `t${i}`);
  assert(new Set(names.map((t) => shardOf(t, 2))).size === 2, "both workers own some");
  return names;
}

async function post(url: string, body?: string | object): Promise<Response> {
  const json = typeof body === "object";
  return await fetch(url, {
    method: "POST",
    body: json ? JSON.stringify(body) : body,
    headers: json ? { "content-type": "application/json" } : {},
  });
}

Deno.test("workers: every topic is published, listed, consumed and acked whichever worker answers", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const listening = logLines(b).filter((l) => l.msg === "listening");
    assertEquals(listening.length, 1, "one listening line for the process");
    assertEquals(listening[0]!.workers, 2);
    const names = topics(12);
    // A new connection per request: the kernel spreads them over both workers.
    for (const t of names) {
      const r = await post(`${b.url}/publish/${t}`, `to ${t}`);
      assertEquals(r.status, 201, await r.text());
    }
    const queues = await (await fetch(`${b.url}/api/queues`)).json() as { name: string }[];
    assertEquals(queues.map((q) => q.name), [...names].sort());
    for (const t of names) {
      const r = await fetch(`${b.url}/consume/${t}`);
      const m = await r.json() as { id: string; payload_text: string };
      assertEquals(m.payload_text, `to ${t}`);
      const ack = await post(`${b.url}/ack/${t}/${m.id}`);
      assertEquals(ack.status, 204, await ack.text());
    }
    const stats = await (await fetch(`${b.url}/api/stats`)).json() as {
      totals: { published: number; acked: number };
    };
    assertEquals([stats.totals.published, stats.totals.acked], [12, 12]);
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

Deno.test("workers: a topic named in a JSON body goes to its owner; the topic limit counts both workers", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, { ...WORKERS, BROKER_MAX_TOPICS: "4" });
    const names = topics(5);
    for (const t of names.slice(0, 4)) {
      const r = await post(`${b.url}/api/topics`, { name: t, retain: "1h" });
      assertEquals(r.status, 201, await r.text());
      const read = await (await fetch(`${b.url}/api/topics/${t}`)).json() as { retain: string };
      assertEquals(read.retain, "1h");
    }
    const fifth = await post(`${b.url}/api/topics`, { name: names[4] });
    assertEquals(fifth.status, 403);
    assertEquals((await fifth.json()).code, "topic_limit_reached");
    await stop(b, "SIGTERM");
  });
});

Deno.test("workers: /metrics is one exposition with each family once and counts added", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    for (const t of topics(6)) await (await post(`${b.url}/publish/${t}`, "x")).body?.cancel();
    const text = await (await fetch(`${b.url}/metrics`)).text();
    const types = text.split("\n").filter((l) => l.startsWith("# TYPE "));
    assertEquals(types.length, new Set(types).size, "no family twice");
    const published = text.split("\n").filter((l) =>
      l.startsWith("ferry_messages_published_total{")
    );
    assertEquals(published.length, 6);
    assertEquals(published.reduce((n, l) => n + Number(l.split(" ").at(-1)), 0), 6);
    await stop(b, "SIGTERM");
  });
});

Deno.test("workers: an event stream from the other worker reaches the client, and ends when it leaves", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    // Open streams on every topic: whichever worker takes the connection, some are forwarded.
    for (const t of topics(6)) {
      const ctl = new AbortController();
      const res = await fetch(`${b.url}/stream/${t}`, { signal: ctl.signal });
      assertEquals(res.status, 200);
      const reader = res.body!.getReader();
      await (await post(`${b.url}/publish/${t}`, `event for ${t}`)).body?.cancel();
      let seen = "";
      while (!seen.includes(`event for ${t}`)) {
        const { value, done } = await reader.read();
        assert(!done, "the stream ended early");
        seen += new TextDecoder().decode(value);
      }
      ctl.abort();
      await reader.cancel().catch(() => {});
    }
    assertEquals((await stop(b, "SIGTERM")).code, 0, "no stream holds the shutdown");
  });
});

Deno.test("workers: a restart with one worker finds every topic two workers wrote", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const names = topics(8);
    for (const t of names) await (await post(`${b.url}/publish/${t}`, t)).body?.cancel();
    assertEquals((await stop(b, "SIGTERM")).code, 0);
    const one = await start(dir, { BROKER_WORKERS: "1" });
    const queues = await (await fetch(`${one.url}/api/queues`)).json() as { name: string }[];
    assertEquals(queues.map((q) => q.name), [...names].sort());
    await stop(one, "SIGTERM");
    const two = await start(dir, WORKERS);
    const again = await (await fetch(`${two.url}/api/queues`)).json() as { depth: number }[];
    assertEquals(again.map((q) => q.depth), names.map(() => 1));
    await stop(two, "SIGTERM");
  });
});

Deno.test("workers: a long poll on any topic is answered by a later publish; touch and requeue cross too", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    for (const t of topics(6)) {
      const poll = fetch(`${b.url}/consume/${t}?timeout=10s&visibility=30s`);
      await (await post(`${b.url}/publish/${t}`, `late ${t}`)).body?.cancel();
      const m = await (await poll).json() as { id: string; payload_text: string };
      assertEquals(m.payload_text, `late ${t}`);
      const touched = await post(`${b.url}/touch/${t}/${m.id}?by=60s`);
      assertEquals(touched.status, 200, await touched.text());
      const requeued = await post(`${b.url}/requeue`, { topic: t, id: m.id });
      assertEquals(requeued.status, 200, await requeued.text());
      const again = await (await fetch(`${b.url}/consume/${t}`)).json() as { retry_count: number };
      assertEquals(again.retry_count, 1);
      const unknown = await post(`${b.url}/ack/${t}/not-an-id`);
      assertEquals(unknown.status, 404, "a refusal crosses back as itself");
      await unknown.body?.cancel();
    }
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

/** The next JSON frame a socket receives; rejects after 10 s, so a lost frame fails the test. */
function nextFrame(ws: WebSocket, what = "a frame"): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.removeEventListener("message", heard);
      reject(new Error(`no frame within 10 s: waited for ${what}`));
    }, 10_000);
    const heard = (e: MessageEvent) => {
      clearTimeout(timer);
      resolve(JSON.parse(e.data));
    };
    ws.addEventListener("message", heard, { once: true });
  });
}

Deno.test("workers: one socket spies on a pattern over both workers and consumes a topic of either", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const ws = new WebSocket(`${b.url.replace("http", "ws")}/ws`);
    await new Promise((r) => ws.addEventListener("open", r, { once: true }));
    const names = topics(6);
    ws.send(JSON.stringify({ type: "subscribe", topic: "*" }));
    assertEquals((await nextFrame(ws)).type, "subscribed");
    for (const t of names) {
      const heard = nextFrame(ws);
      await (await post(`${b.url}/publish/${t}`, `spied ${t}`)).body?.cancel();
      const f = await heard as { topic: string; message: { payload_text: string } };
      assertEquals(f.message.payload_text, `spied ${t}`, "the spy hears every worker's topics");
    }
    ws.send(JSON.stringify({ type: "unsubscribe", topic: "*" }));
    assertEquals((await nextFrame(ws)).type, "unsubscribed");
    for (const t of names) {
      ws.send(JSON.stringify({ type: "subscribe", topic: t, group: "g", prefetch: 1 }));
      assertEquals((await nextFrame(ws)).type, "subscribed");
      const delivered = nextFrame(ws);
      await (await post(`${b.url}/publish/${t}`, `pushed ${t}`)).body?.cancel();
      const f = await delivered as { message: { id: string; payload_text: string } };
      assertEquals(f.message.payload_text, `pushed ${t}`);
      ws.send(JSON.stringify({ type: "ack", topic: t, id: f.message.id }));
      ws.send(JSON.stringify({ type: "unsubscribe", topic: t }));
      assertEquals((await nextFrame(ws)).type, "unsubscribed", "the ack was taken, no error");
    }
    const queues = await (await fetch(`${b.url}/api/queues`)).json() as { groups: string[] }[];
    assert(queues.every((q) => q.groups.includes("g")));
    ws.close();
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

Deno.test("workers: a message published right after `subscribed` reaches a new group on the other worker", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const ws = new WebSocket(`${b.url.replace("http", "ws")}/ws`);
    await new Promise((r) => ws.addEventListener("open", r, { once: true }));
    // A new group starts at the topic's end: confirmed before it exists on the owner, a publish
    // that lands on the owner first would fall before its start and never be delivered.
    for (let i = 0; i < 120; i++) {
      const t = `t${i % 8}`;
      ws.send(JSON.stringify({ type: "subscribe", topic: t, group: `g${i}`, prefetch: 1 }));
      assertEquals((await nextFrame(ws, `subscribed ${t}`)).type, "subscribed");
      const delivered = nextFrame(ws, `the delivery of "first ${i}"`);
      await (await post(`${b.url}/publish/${t}`, `first ${i}`)).body?.cancel();
      const f = await delivered as { message: { payload_text: string } };
      assertEquals(f.message.payload_text, `first ${i}`);
      ws.send(JSON.stringify({ type: "unsubscribe", topic: t }));
      assertEquals((await nextFrame(ws, "unsubscribed")).type, "unsubscribed");
    }
    ws.close();
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

/** Sends `request` on a raw socket and reads the status line of the answer. */
async function rawStatus(port: number, request: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode(request));
  const buf = new Uint8Array(4096);
  const n = await conn.read(buf) ?? 0;
  conn.close();
  return new TextDecoder().decode(buf.subarray(0, n)).split("\r\n")[0]!;
}

Deno.test("workers: a Host header that makes no URL is a 400, not the end of a worker", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const body = JSON.stringify({ name: "t1" });
    for (const host of ["@", "[", "x:99999"]) {
      assertEquals(
        await rawStatus(
          b.port,
          `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        ),
        "HTTP/1.1 400 Bad Request",
      );
      const post =
        `POST /api/topics HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
      assertEquals(await rawStatus(b.port, post), "HTTP/1.1 400 Bad Request");
    }
    assertEquals((await fetch(`${b.url}/healthz`)).status, 200, "both workers still serve");
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

/** Opens an event stream (its answer's head is in); `until(text)` reads on to `text`, then ends it. */
async function openStream(url: string): Promise<{ until(want: string): Promise<void> }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  const reader = res.body!.getReader();
  return {
    async until(want: string) {
      let seen = "";
      try {
        while (!seen.includes(want)) {
          const { value, done } = await reader.read();
          assert(!done, `the stream ended before "${want}"`);
          seen += new TextDecoder().decode(value);
        }
      } finally {
        await reader.cancel().catch(() => {});
      }
    },
  };
}

Deno.test("workers: a second stream resumes with the events a first one already carried across", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    for (const t of topics(6)) {
      const first = await openStream(`${b.url}/stream/${t}`);
      await (await post(`${b.url}/publish/${t}`, `once ${t}`)).body?.cancel();
      await first.until(`once ${t}`);
      // The event's bytes are built once and kept for every reader of the topic.
      await (await openStream(`${b.url}/stream/${t}?last_event_id=0`)).until(`once ${t}`);
    }
    assertEquals((await stop(b, "SIGTERM")).code, 0);
  });
});

Deno.test("workers: audit lines name the webhook's URL whichever worker owns its topic", async () => {
  await withDataDir(async (dir) => {
    const b = await start(dir, WORKERS);
    const urls = new Map<string, string>();
    // 192.0.2.0/24 is for documentation: allowed, and never delivered to (nothing is published).
    for (const t of topics(8)) {
      const url = `http://192.0.2.7:9/hook-${t}`;
      const r = await post(`${b.url}/webhook/${t}`, { url });
      const text = await r.text();
      assertEquals(r.status, 201, text);
      const { id } = JSON.parse(text) as { id: string };
      const deleted = await fetch(`${b.url}/api/webhooks/${id}`, { method: "DELETE" });
      assertEquals(deleted.status, 200, await deleted.text());
      assertEquals(deleted.headers.get("x-ferry-audit-subject"), null, "kept inside the broker");
      urls.set(t, url);
    }
    await stop(b, "SIGTERM");
    const audits = logLines(b).filter((l) => l.msg === "audit");
    const subjects = (action: string) =>
      audits.filter((l) => l.action === action).map((l) => l.subject).sort();
    const expected = [...urls.values()].sort();
    assertEquals(subjects("webhook.add"), expected);
    assertEquals(subjects("webhook.delete"), expected);
  });
});
