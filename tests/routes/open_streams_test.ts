/**
 * Revoking a key ends what is open under it: a broker as a child process with a keys file, SSE
 * streams (a fetch reader and a real EventSource) and WebSockets opened with keys, the file
 * rewritten and a real SIGHUP, with one worker and with two.
 */

import { assertEquals, assertMatch } from "../_support/assert.ts";
import { publish } from "../_support/http.ts";
import { type ChildBroker, spawnBroker, stop } from "../_support/child.ts";
import { openSse, type SseEvent, type SseReader } from "../_support/sse.ts";
import { within } from "../_support/wait.ts";

const LEAVING = "leaving-key-aaaa";
const NARROWED = "narrowed-key-bbbb";
const KEPT = "kept-key-cccc";
const PUB = "pub-key-dddd";

/** How long a test waits for what a reload should do at once. */
const WAIT_MS = 10_000;

/** A WebSocket's JSON frames as they come, and its close. */
function socket(url: string): { ws: WebSocket; frames: unknown[]; closed: Promise<CloseEvent> } {
  const ws = new WebSocket(url);
  const frames: unknown[] = [];
  ws.onmessage = (e) => frames.push(JSON.parse(e.data));
  const closed = new Promise<CloseEvent>((r) => ws.addEventListener("close", r));
  return { ws, frames, closed };
}

/** Sends a subscribe frame once the socket is open and waits for its `subscribed` answer. */
function subscribed(ws: WebSocket, frame: Record<string, unknown>): Promise<void> {
  const answered = new Promise<void>((resolve, reject) => {
    ws.addEventListener("message", (e) => {
      if (JSON.parse(e.data).type === "subscribed") resolve();
    });
    ws.addEventListener("close", () => reject(new Error("closed before subscribed")));
  });
  const send = () => ws.send(JSON.stringify({ type: "subscribe", ...frame }));
  if (ws.readyState === WebSocket.OPEN) send();
  else ws.addEventListener("open", send);
  return within(answered, WAIT_MS, `subscribed to ${frame.topic}`);
}

/** The events of a stream up to and including the first named one; the rest is left unread. */
async function until(reader: SseReader, name: string): Promise<SseEvent[]> {
  const seen: SseEvent[] = [];
  for (let ev = await reader.next(); ev; ev = await reader.next()) {
    seen.push(ev);
    if (ev.event === name) return seen;
  }
  throw new Error(`the stream ended without event: ${name}: ${JSON.stringify(seen)}`);
}

for (const workers of [1, 2]) {
  Deno.test(`SIGHUP that revokes a key ends its SSE streams and WebSockets (BROKER_WORKERS=${workers})`, async () => {
    const dataDir = await Deno.makeTempDir({ prefix: "ferry-revoke-" });
    const file = await Deno.makeTempFile({ prefix: "ferry-keys-" });
    await Deno.writeTextFile(
      file,
      `${LEAVING}:consume name=leaving\n${NARROWED}:consume,publish name=narrowed\n` +
        `${KEPT}:consume name=kept\n${PUB}:publish name=pub\n`,
    );
    let child: ChildBroker | undefined;
    const readers: SseReader[] = [];
    const sockets: WebSocket[] = [];
    let es: EventSource | undefined;
    try {
      child = await spawnBroker({
        dataDir,
        env: { BROKER_API_KEYS_FILE: file, BROKER_WORKERS: String(workers) },
      });
      const url = child.url;
      const ws = url.replace(/^http/, "ws");
      const sse = (topic: string, key: string) =>
        openSse(`${url}/stream/${topic}`, { authorization: `Bearer ${key}` });
      // Topics on both workers (with two) and a stream of each key.
      const leavingSse = await sse("rv-a", LEAVING);
      const narrowedSse = await sse("rv-b", NARROWED);
      const keptSse = await sse("rv-a", KEPT);
      readers.push(leavingSse, narrowedSse, keptSse);
      for (const r of readers) assertEquals(r.status, 200);
      // A real EventSource too: after `event: revoked` it reconnects, is refused, and stops.
      es = new EventSource(`${url}/stream/rv-c?api_key=${LEAVING}`);
      const esRevoked = new Promise<MessageEvent>((r) => es!.addEventListener("revoked", r));
      const esOpened = new Promise((r) => es!.onopen = r);
      const leavingWs = socket(`${ws}/ws?api_key=${LEAVING}`);
      const keptWs = socket(`${ws}/ws?api_key=${KEPT}`);
      sockets.push(leavingWs.ws, keptWs.ws);
      await subscribed(leavingWs.ws, { topic: "rv-a", group: "g" });
      await subscribed(keptWs.ws, { topic: "rv-*" });
      await within(esOpened, WAIT_MS, "EventSource open");

      await Deno.writeTextFile(
        file,
        `${NARROWED}:publish name=narrowed\n${KEPT}:consume name=kept\n` +
          `${PUB}:publish name=pub\n`,
      );
      const from = child.logs.length;
      child.kill("SIGHUP");
      await child.logged("api keys reloaded", from, WAIT_MS);

      // The revoked key's stream ends with event: revoked naming why; so does the narrowed one's.
      const gone = await within(until(leavingSse, "revoked"), WAIT_MS, "revoked SSE");
      assertEquals(JSON.parse(gone.at(-1)!.data!).code, "unauthorized");
      assertMatch(JSON.parse(gone.at(-1)!.data!).reason, /API key revoked/);
      assertEquals(await within(leavingSse.next(), WAIT_MS, "end of the stream"), undefined);
      const narrowed = await within(until(narrowedSse, "revoked"), WAIT_MS, "narrowed SSE");
      assertEquals(JSON.parse(narrowed.at(-1)!.data!).code, "forbidden");
      assertMatch(JSON.parse(narrowed.at(-1)!.data!).reason, /no longer has the "consume" scope/);
      // The socket hears an error frame, then closes with 1008 and the reason.
      const closed = await within(leavingWs.closed, WAIT_MS, "revoked socket closed");
      assertEquals([closed.code, closed.reason], [1008, "API key revoked"]);
      assertEquals(
        (leavingWs.frames.at(-1) as Record<string, string>).code,
        "unauthorized",
        JSON.stringify(leavingWs.frames),
      );
      const esEvent = await within(esRevoked, WAIT_MS, "EventSource revoked event");
      assertEquals(JSON.parse(esEvent.data).code, "unauthorized");
      await within(
        new Promise<void>((r) => {
          const check = () => es!.readyState === EventSource.CLOSED ? r() : setTimeout(check, 20);
          check();
        }),
        WAIT_MS,
        "EventSource refused on reconnect",
      );

      // What the kept key holds goes on.
      const keptHeard = new Promise<Record<string, Record<string, string>>>((r) =>
        keptWs.ws.addEventListener("message", (e) => {
          const f = JSON.parse(e.data);
          if (f.type === "message") r(f);
        })
      );
      await publish(url, "rv-a", "after-revoke", "", { authorization: `Bearer ${PUB}` });
      const [ev] = await within(keptSse.take(1), WAIT_MS, "kept SSE message");
      assertEquals(JSON.parse(ev!.data!).payload_text, "after-revoke");
      const frame = await within(keptHeard, WAIT_MS, "kept socket message");
      assertEquals(frame.message!.payload_text, "after-revoke");
      assertEquals(keptWs.ws.readyState, WebSocket.OPEN);
    } finally {
      es?.close();
      for (const w of sockets) w.close();
      for (const r of readers) await r.close();
      if (child) await stop(child, "SIGTERM");
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(file).catch(() => {});
    }
  });
}
