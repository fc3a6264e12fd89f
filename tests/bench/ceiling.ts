/**
 * The HTTP ceiling for `tests/bench/load.ts`: a bare `Deno.serve` that reads a POST body fully
 * and answers 201 with a small JSON body shaped like a publish answer. No broker, no disk, so
 * its req/s is what one Deno process can do at all; broker figures are read as a share of it.
 *
 * It also stands in for a drain: any GET answers one prebuilt array of 100 Message objects of
 * 1 KiB (the shape routes/wire.ts writes, built once at start), and `POST /ack/...`
 * parses its `{"ids":[...]}` body and answers `{"acked":N}`. Driven by the harness's consume
 * script, that is what HTTP and the load generator allow a drain at all.
 *
 * `deno run -A tests/bench/ceiling.ts [--port N]` logs `{"msg":"listening","port":N}` on stderr
 * like the broker, so the harness starts both the same way.
 */

const portArg = Deno.args.indexOf("--port");
const port = portArg >= 0 ? Number(Deno.args[portArg + 1]) : 0;

let counter = 0;

/** A consume answer of 100 messages of 1 KiB, as one flat string. */
function drainAnswer(): string {
  const payload = new Uint8Array(1024).fill(120);
  const text = JSON.stringify(new TextDecoder().decode(payload));
  const messages: string[] = [];
  for (let i = 0; i < 100; i++) {
    const id = i.toString(16).padStart(32, "0");
    messages.push(
      `{"id":"${id}","topic":"ceiling","payload":"${payload.toBase64()}",` +
        `"timestamp":"${new Date().toISOString()}","retry_count":0,"headers":{},` +
        `"priority":"normal","payload_text":${text}}`,
    );
  }
  return `[${messages.join(",")}]`;
}
const DRAIN_ANSWER = drainAnswer();
const JSON_HEADERS = { "content-type": "application/json" };

/** Reads the body with a reader loop, as the broker's readBody does, and drops the bytes. */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<number> {
  if (!body) return 0;
  const reader = body.getReader();
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.byteLength;
  }
}

const server = Deno.serve(
  { hostname: "127.0.0.1", port, onListen: () => {} },
  async (req) => {
    // Cheap tests, so the publish ceiling pays next to nothing for them.
    if (req.method === "GET") return new Response(DRAIN_ANSWER, { headers: JSON_HEADERS });
    if (req.url.includes("/ack/")) {
      const { ids } = await req.json() as { ids: string[] };
      return new Response(`{"acked":${ids.length}}`, { headers: JSON_HEADERS });
    }
    let size = 0;
    try {
      size = await drain(req.body);
    } catch {
      return new Response(null, { status: 400 }); // client left mid-body
    }
    const id = (++counter).toString(16).padStart(32, "0");
    const body = `{"id":"${id}","topic":"ceiling","timestamp":"${
      new Date().toISOString()
    }","priority":"normal","deduplicated":false,"bytes":${size}}`;
    return new Response(body, { status: 201, headers: { "content-type": "application/json" } });
  },
);

console.error(JSON.stringify({ msg: "listening", port: server.addr.port }));

Deno.addSignalListener("SIGTERM", () => {
  server.shutdown().then(() => Deno.exit(0));
});
