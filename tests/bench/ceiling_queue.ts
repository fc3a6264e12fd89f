/**
 * The least a durable queue over HTTP has to do, for `tests/bench/load.ts` to read Ferry's
 * figures against: what this machine, Deno and the harness's own clients allow at all.
 *
 *   POST /publish/{topic}   lists the request's headers for its X-MQ-* ones (Ferry keeps them,
 *                           and a server can only find them by listing) and reads the body; with
 *                           `--dir D` appends both to `D/queue.log` and answers once they are
 *                           on disk (one write + one fdatasync per batch of whatever arrived
 *                           meanwhile: group commit, as the broker's WAL does); then hands the
 *                           message to a parked consumer or queues it; 201 with an id.
 *   GET /consume/{topic}    up to `limit` messages (`{"id","payload_text"}`; one object when
 *                           limit=1), parking up to `timeout` (`5s`, `250ms`) for the first; 404
 *                           when none came.
 *   POST /ack/...           appends the ack (its body, or its path for one id) like a publish
 *                           and answers 200 `{"acked":1}` once it is on disk, since Ferry's 2xx
 *                           means fsynced; nothing is redelivered.
 *
 * No topics, groups, leases, ids that sort, validation or metrics: every row that beats it would
 * be wrong. `--bare` leaves out what Ferry's contract adds to the least a queue does (the header
 * listing and durable acks), to show what they cost.
 * `deno run -A tests/bench/ceiling_queue.ts [--port N] [--dir D] [--bare]` logs
 * `{"msg":"listening","port":N}` on stderr like the broker.
 */

import { readDuration } from "../../protocol/duration.ts";

function arg(name: string): string | undefined {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : undefined;
}

const JSON_HEADERS = { "content-type": "application/json" };
const decoder = new TextDecoder();
const encoder = new TextEncoder();
const bare = Deno.args.includes("--bare");

/** Appends with one write + fdatasync per batch; each append resolves once its bytes are. */
class GroupCommit {
  #waiting: { bytes: Uint8Array; done: () => void }[] = [];
  #flushing = false;

  constructor(private readonly file: Deno.FsFile) {}

  append(bytes: Uint8Array): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#waiting.push({ bytes, done: resolve });
    if (!this.#flushing) this.#flush();
    return promise;
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    while (this.#waiting.length) {
      const batch = this.#waiting;
      this.#waiting = [];
      const all = new Uint8Array(batch.reduce((n, w) => n + w.bytes.length, 0));
      let at = 0;
      for (const w of batch) {
        all.set(w.bytes, at);
        at += w.bytes.length;
      }
      for (let done = 0; done < all.length;) done += await this.file.write(all.subarray(done));
      await this.file.syncData();
      for (const w of batch) w.done();
    }
    this.#flushing = false;
  }
}

/** A record of the stored headers (as a JSON line) and then the body. */
function withHeaders(stored: string[], body: Uint8Array): Uint8Array {
  const line = encoder.encode(JSON.stringify(stored) + "\n");
  const out = new Uint8Array(line.length + body.length);
  out.set(line);
  out.set(body, line.length);
  return out;
}

const dir = arg("--dir");
const log = dir
  ? new GroupCommit(
    await Deno.open(`${dir}/queue.log`, { write: true, create: true, append: true }),
  )
  : undefined;

let counter = 0;
/** Messages as their wire JSON, oldest first. */
const queued: string[] = [];
let head = 0;
/** Parked consumers: each takes the next message. */
const parked: ((message: string) => void)[] = [];

function take(limit: number): string[] {
  const out = queued.slice(head, head + limit);
  head += out.length;
  if (head > 4096 && head * 2 > queued.length) {
    queued.splice(0, head);
    head = 0;
  }
  return out;
}

function answer(messages: string[], limit: number): Response {
  const body = limit === 1 ? messages[0]! : `[${messages.join(",")}]`;
  return new Response(body, { headers: JSON_HEADERS });
}

const port = Number(arg("--port") ?? 0);
const server = Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, async (req) => {
  const url = new URL(req.url);
  if (req.method === "GET" && url.pathname.startsWith("/consume/")) {
    const limit = Math.max(1, Number(url.searchParams.get("limit") ?? 1));
    const now = take(limit);
    if (now.length) return answer(now, limit);
    const wait = readDuration(url.searchParams.get("timeout") ?? "") ?? 0;
    if (!wait) return new Response(null, { status: 404 });
    const got = await new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => {
        parked.splice(parked.indexOf(hand), 1);
        resolve(undefined);
      }, wait);
      const hand = (m: string) => {
        clearTimeout(timer);
        resolve(m);
      };
      parked.push(hand);
    });
    return got === undefined ? new Response(null, { status: 404 }) : answer([got], limit);
  }
  if (req.method === "POST" && url.pathname.startsWith("/ack/")) {
    const body = new Uint8Array(await req.arrayBuffer());
    if (!bare) await log?.append(body.length ? body : encoder.encode(url.pathname));
    return new Response('{"acked":1}', { headers: JSON_HEADERS });
  }
  if (req.method === "POST" && url.pathname.startsWith("/publish/")) {
    const stored: string[] = [];
    if (!bare) {
      req.headers.forEach((value, name) => {
        if (name.startsWith("x-mq-")) stored.push(name, value);
      });
    }
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await req.arrayBuffer());
    } catch {
      return new Response(null, { status: 400 }); // client left mid-body
    }
    await log?.append(stored.length ? withHeaders(stored, bytes) : bytes);
    const id = (++counter).toString(16).padStart(32, "0");
    const message = `{"id":"${id}","payload_text":${JSON.stringify(decoder.decode(bytes))}}`;
    const consumer = parked.shift();
    if (consumer) consumer(message);
    else queued.push(message);
    return new Response(`{"id":"${id}"}`, { status: 201, headers: JSON_HEADERS });
  }
  if (url.pathname === "/healthz") return new Response("ok");
  return new Response(null, { status: 404 });
});

console.error(JSON.stringify({ msg: "listening", port: server.addr.port }));

Deno.addSignalListener("SIGTERM", () => {
  server.shutdown().then(() => Deno.exit(0));
});
