/**
 * The built package under Node 20: `deno task build:client` writes it, a real `node` imports
 * `mod.js` and runs publish → consume → ack, a FerryError, a `messages()` loop, an event stream
 * (Node has no EventSource) and, with `--experimental-websocket`, a WebSocket subscription,
 * against a real broker; and tsc type-checks a consumer of the
 * package's `.d.ts` files as Node resolves them.
 */

import ts from "typescript";
import { assert, assertEquals } from "../../_support/assert.ts";
import { startBroker } from "../../_support/server.ts";
import { start, stop } from "../../_support/child.ts";
import { makePki } from "../../_support/tls.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const NODE = "/usr/bin/node";

/** Runs `deno task build:client --out <dir>`; throws with its output when it fails. */
async function buildClient(out: string): Promise<void> {
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["task", "build:client", "--out", out],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(r.stdout) + new TextDecoder().decode(r.stderr);
  if (!r.success) throw new Error(`build:client failed:\n${text}`);
}

/** What the node script does; it prints one JSON line. */
const SCRIPT = `
import { Ferry, FerryError } from "./pkg/mod.js";
const ferry = new Ferry({ url: process.argv[2] });
const out = { node: process.version };
const published = await ferry.publish("from-node", { hello: "node" }, { headers: { trace: "n1" } });
const [msg] = await ferry.consume("from-node");
await ferry.ack("from-node", msg.id);
out.roundTrip = { same: msg.id === published.id, text: msg.payload_text, headers: msg.headers };
out.after = (await ferry.consume("from-node")).length;
try {
  await ferry.publish("bad name!", "x");
} catch (e) {
  out.error = { isFerryError: e instanceof FerryError, status: e.status, code: e.code };
}
const batch = await ferry.publishBatch("batch", ["text", new Uint8Array([0, 255, 7])]);
const taken = await ferry.consume("batch", { limit: 2, autoAck: true });
out.batch = { ids: batch.map((p) => p.id).join() === taken.map((m) => m.id).join(),
  payloads: taken.map((m) => m.payload) };
for (const t of ["a", "b", "c"]) await ferry.publish("loop", t);
const ac = new AbortController();
const looped = [];
for await (const m of ferry.messages("loop", { batch: 3, signal: ac.signal })) {
  looped.push(m.payload_text);
  if (looped.length === 3) ac.abort();
}
out.looped = looped;
out.leftInFlight = (await ferry.stats()).topics.loop.in_flight;
await ferry.createTopic("live"); // the gauge below lists existing topics
const streamed = (async () => {
  for await (const m of ferry.stream("live")) return m.payload_text;
})();
const connected = 'ferry_stream_subscribers{topic="live"} 1';
for (let i = 0; i < 500 && !(await ferry.metrics()).includes(connected); i++);
await ferry.publish("live", "streamed to node");
out.streamed = await streamed;
const heard = [];
let done;
const all = new Promise((r) => done = r);
const sub = ferry.subscribe("ws.*", (m) => {
  heard.push(m.payload_text);
  if (heard.length === 2) done();
});
sub.subscribe("ws.jobs", (m) => {
  heard.push("job " + m.payload_text);
  if (heard.length === 2) done();
}, { group: "node" });
await sub.ready;
await ferry.publish("ws.jobs", "over a socket");
await all;
await sub.close();
out.socket = heard.sort();
console.log(JSON.stringify(out));
`;

/** One build for the tests of this file, in a temp dir removed when the file's tests end. */
let built: Promise<string> | undefined;
function builtPackage(): Promise<string> {
  return built ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "ferry-node-" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    await buildClient(`${dir}/pkg`);
    return dir;
  })();
}

Deno.test({
  name:
    "the built package under Node 20: publish, consume, ack, errors, messages, stream, subscribe",
  async fn() {
    const dir = await builtPackage();
    const broker = await startBroker();
    try {
      const pkg = JSON.parse(await Deno.readTextFile(`${dir}/pkg/package.json`));
      assertEquals([pkg.name, pkg.type, pkg.main, pkg.types], [
        "@ferry/client",
        "module",
        "./mod.js",
        "./mod.d.ts",
      ]);
      await Deno.writeTextFile(`${dir}/run.mjs`, SCRIPT);
      const run = await new Deno.Command(NODE, {
        args: ["--experimental-websocket", `${dir}/run.mjs`, broker.url],
        cwd: dir,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(run.stderr);
      assert(run.success, `node failed:\n${stderr}`);
      const out = JSON.parse(new TextDecoder().decode(run.stdout).trim().split("\n").at(-1)!);
      assert(/^v2\d\./.test(out.node), `node ${out.node}`);
      assertEquals(out.roundTrip, {
        same: true,
        text: '{"hello":"node"}',
        headers: { "x-mq-trace": "n1" },
      });
      assertEquals(out.after, 0, "acked");
      assertEquals(out.batch, { ids: true, payloads: ["dGV4dA==", "AP8H"] }, "btoa, not toBase64");
      assertEquals(out.error, { isFerryError: true, status: 400, code: "invalid_name" });
      assertEquals([out.looped, out.leftInFlight], [["a", "b", "c"], 0]);
      assertEquals(out.streamed, "streamed to node");
      assertEquals(out.socket, ["job over a socket", "over a socket"]);
    } finally {
      await broker.close();
    }
  },
});

Deno.test("the package's .d.ts files type-check a consumer as Node resolves them", async () => {
  const dir = await builtPackage();
  const consumer = `${dir}/use.mts`;
  await Deno.writeTextFile(
    consumer,
    `import { Ferry, FerryError, type Message, type PublishAnswer } from "./pkg/mod.js";
const ferry = new Ferry({ url: "http://127.0.0.1:7800", timeoutMs: 5_000 });
export async function use(): Promise<string[]> {
const p: PublishAnswer = await ferry.publish("t", "x", { ttl: "1m" });
const [m]: Message[] = await ferry.consume("t", { limit: 1 });
const broadcast = await ferry.publish("t", "y", { broadcast: true });
const n: number = broadcast.delivered_to;
// @ts-expect-error: a string is no status
const wrong: string = new FerryError({ status: 1, code: "timeout", detail: "" }).status;
return [p.id, m?.id ?? "", String(n), wrong];
}
`,
  );
  const program = ts.createProgram([consumer], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    types: [],
    strict: true,
    noEmit: true,
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, "\n")
  );
  assertEquals(problems, []);
});

Deno.test("the built package under Node over HTTPS trusts a private CA through NODE_EXTRA_CA_CERTS", async () => {
  const dir = await builtPackage();
  const pki = await makePki();
  const data = await Deno.makeTempDir({ prefix: "ferry-node-tls-" });
  try {
    const b = await start(data, { BROKER_TLS_CERT: pki.certFile, BROKER_TLS_KEY: pki.keyFile });
    const url = b.url.replace("http:", "https:");
    await Deno.writeTextFile(
      `${dir}/tls.mjs`,
      `import { Ferry } from "./pkg/mod.js";
const ferry = new Ferry({ url: process.argv[2], retries: 0 });
const p = await ferry.publish("secure", "over tls");
const [m] = await ferry.consume("secure", { autoAck: true });
console.log(JSON.stringify({ id: p.id === m.id, text: m.payload_text }));
`,
    );
    const node = (env: Record<string, string>) =>
      new Deno.Command(NODE, {
        args: [`${dir}/tls.mjs`, url],
        cwd: dir,
        env,
        stdout: "piped",
        stderr: "piped",
      })
        .output();
    const trusted = await node({ NODE_EXTRA_CA_CERTS: pki.caFile });
    assert(trusted.success, new TextDecoder().decode(trusted.stderr));
    assertEquals(JSON.parse(new TextDecoder().decode(trusted.stdout)), {
      id: true,
      text: "over tls",
    });
    const untrusted = await node({});
    assert(!untrusted.success, "without the CA, Node refuses the certificate");
    await stop(b, "SIGTERM");
  } finally {
    await Deno.remove(data, { recursive: true });
    await pki.remove();
  }
});
