/**
 * The process's life: SIGTERM under publish load exits 0 and loses no answered publish, start-up
 * logs, `--help`, and bad settings that stop start-up with one line.
 */

import { assert, assertEquals, assertMatch, assertNotEquals } from "../_support/assert.ts";
import { SETTINGS } from "../../lib/config.ts";
import {
  type ChildBroker,
  logLines,
  runMain,
  start,
  stop,
  withDataDir,
} from "../_support/child.ts";
import { drain } from "../_support/http.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Every text file under `dir`, recursively (node_modules and data dirs aside). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory && !["node_modules", "data", "dist"].includes(e.name)) {
      out.push(...filesUnder(path));
    } else if (e.isFile && /\.(ts|go|sh|md|json|ya?ml)$|^run$/.test(e.name)) out.push(path);
  }
  return out;
}

Deno.test({
  name:
    "SIGTERM under 8 concurrent publishers exits 0, logs stopped, and keeps every answered publish",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      let child = await start(dir);
      const listening = logLines(child).find((l) => l.msg === "listening");
      for (const f of ["address", "port", "data_dir", "fsync", "topics", "messages"]) {
        assert(listening && f in listening, `listening line lacks ${f}: ${child.logs}`);
      }
      assert(logLines(child).some((l) => l.msg === "recovered"));

      const answered: string[] = [];
      let refused = 0;
      let total = 0;
      let midLoad!: () => void;
      const loaded = new Promise<void>((r) => midLoad = r);
      const publisher = async (w: number) => {
        for (let i = 0;; i++) {
          let res: Response;
          try {
            res = await fetch(`${child.url}/publish/life`, { method: "POST", body: `p${w}-${i}` });
          } catch {
            return; // the server has closed
          }
          const body = await res.text();
          if (res.status === 201) answered.push(JSON.parse(body).id);
          else if (res.status === 503) refused++;
          else throw new Error(`publish answered ${res.status}: ${body}`);
          if (++total === 300) midLoad();
          if (res.status === 503) return;
        }
      };
      const publishers = Promise.all(Array.from({ length: 8 }, (_, w) => publisher(w)));
      await loaded;
      const t0 = performance.now();
      const status = await stop(child, "SIGTERM"); // waits for the exit; SIGKILL after 10 s
      const seconds = (performance.now() - t0) / 1000;
      await publishers;
      assertEquals(
        status.code,
        0,
        `exit status ${JSON.stringify(status)}:\n${child.logs}`,
      );
      assert(seconds < 10, `took ${seconds} s to stop`);
      const lines = logLines(child);
      assert(lines.some((l) => l.msg === "shutting down" && l.signal === "SIGTERM"));
      assert(lines.some((l) => l.msg === "stopped"), child.logs.join("\n"));
      assert(answered.length >= 250, `only ${answered.length} publishes answered`);

      child = await start(dir);
      const back = new Set((await drain(child.url, "life", "auto_ack=true")).map((m) => m.id));
      const lost = answered.filter((id) => !back.has(id));
      assertEquals(lost, [], `${lost.length} of ${answered.length} answered publishes lost`);
      assertEquals((await stop(child, "SIGTERM")).code, 0);
      console.log(`${answered.length} answered, ${refused} refused while draining, none lost`);
    }),
});

Deno.test("main.ts --help exits 0 and lists every setting with its flag and default", async () => {
  const { code, stdout } = await runMain({ dataDir: ":memory:", args: ["--help"] });
  assertEquals(code, 0);
  for (const s of SETTINGS) {
    const row = stdout.split("\n").find((l) => l.includes(` ${s.env} `) || l.endsWith(s.env));
    assert(row, `--help lacks ${s.env}:\n${stdout}`);
    assert(row.includes(s.flag), `${s.env}: no ${s.flag}`);
    assert(row.includes(JSON.stringify(s.def)), `${s.env}: no default ${s.def}`);
  }
});

Deno.test("a bad setting stops start-up with one stderr line naming it and no stack trace", async () => {
  const cases: [Record<string, string>, string[], string][] = [
    [{ PORT: "abc" }, [], "PORT"],
    [{ BROKER_FSYNC: "sometimes" }, [], "BROKER_FSYNC"],
    [{}, ["--visibility", "soon"], "--visibility"],
    [{ BROKER_LOG_LEVEL: "loud" }, [], "BROKER_LOG_LEVEL"],
    [{}, ["--no-such-flag", "1"], "--no-such-flag"],
    [{ BROKER_MAX_MEMORY: "lots" }, [], "BROKER_MAX_MEMORY"],
    [{}, ["--max-memory", "0"], "--max-memory"],
    [{ BROKER_MAX_MEMORY: "150%" }, [], "BROKER_MAX_MEMORY"],
  ];
  for (const [env, args, name] of cases) {
    const { code, stderr } = await runMain({ dataDir: ":memory:", args, env });
    const what = `${JSON.stringify(env)} ${args.join(" ")}: exit ${code}\n${stderr}`;
    assertNotEquals(code, 0, what);
    assertEquals(stderr.trim().split("\n").length, 1, what);
    assert(stderr.includes(name), what);
    assert(!/\n\s+at /.test(stderr) && !stderr.includes("Stack backtrace"), what);
  }
});

Deno.test("a misspelt BROKER_* variable or flag stops start-up, exit 2, with the name meant", async () => {
  const cases: [Record<string, string>, string[], string][] = [
    [
      { BROKER_DATADIR: "/tmp/typo", PORT: "0" },
      [],
      "unknown setting BROKER_DATADIR (did you mean BROKER_DATA_DIR?)",
    ],
    [
      { BROKER_FSINC: "never", PORT: "0" },
      [],
      "unknown setting BROKER_FSINC (did you mean BROKER_FSYNC?)",
    ],
    [
      { PORT: "0" },
      ["--data-dri", "/tmp/typo"],
      'unknown flag "--data-dri" (did you mean --data-dir?)',
    ],
    [{}, ["--port", "abc"], '--port must be an integer from 0 to 65535, got "abc"'],
    [{ PORT: "abc" }, [], 'PORT must be an integer from 0 to 65535, got "abc"'],
  ];
  for (const [env, args, line] of cases) {
    const { code, stderr } = await runMain({ dataDir: ":memory:", args, env });
    assertEquals([code, stderr], [2, `ferry: ${line}\n`], `${JSON.stringify(env)} ${args}`);
  }
  const far = await runMain({
    dataDir: ":memory:",
    env: { BROKER_NOTHING_LIKE_IT: "1", PORT: "0" },
  });
  assertEquals(far.code, 2, far.stderr);
  assertMatch(
    far.stderr,
    /^ferry: unknown setting BROKER_NOTHING_LIKE_IT; the BROKER_\* settings are BROKER_HOST, .*BROKER_DATA_DIR, .* \(see --help\)\n$/,
  );
});

Deno.test("every BROKER_* name the tests, tools and docs use is a setting the broker knows", () => {
  const known = new Set(SETTINGS.map((s) => s.env));
  const files = ["tools", "tests", "clients/go", "docs", ".ci"].flatMap((d) =>
    filesUnder(ROOT + d)
  );
  const used = new Set<string>();
  for (const file of files) {
    for (const m of Deno.readTextFileSync(file).matchAll(/\bBROKER_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      used.add(m[0]);
    }
  }
  // Names that are no variable: prefixes in prose (BROKER_ETCD_*), constants of the bench
  // harness, the launcher's list of names, and the misspellings the test above shows refused.
  const notVariables = [
    "BROKER_ETCD",
    "BROKER_TLS",
    "BROKER_RUNTIME_FLAGS",
    "BROKER_RUNTIME_ENV",
    "BROKER_ENV_NAMES",
    "BROKER_DATADIR",
    "BROKER_FSINC",
    "BROKER_NOTHING_LIKE_IT",
  ];
  const unknown = [...used].filter((n) => !known.has(n) && !notVariables.includes(n));
  assertEquals(unknown, [], "BROKER_* names no setting has");
});

Deno.test("a port in use stops start-up with a clear line; BROKER_LOG_LEVEL filters the log", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = String((taken.addr as Deno.NetAddr).port);
    for (const [level, showsInfo] of [["info", true], ["error", false]] as const) {
      const { code, stderr } = await runMain({
        dataDir: ":memory:",
        args: ["--port", port],
        env: { BROKER_LOG_LEVEL: level },
      });
      const what = `level ${level}: exit ${code}\n${stderr}`;
      assertEquals(code, 1, what);
      assert(
        stderr.includes(
          `ferry: cannot listen on 127.0.0.1:${port}: Address already in use; another process ` +
            "has this port: stop it or set PORT (--port) to another\n",
        ),
        what,
      );
      assert(!/\n\s+at /.test(stderr), what);
      assertEquals(stderr.includes('"msg":"recovered"'), showsInfo, what);
      assert(stderr.includes('"level":"error","msg":"cannot listen"'), what);
    }
  } finally {
    taken.close();
  }
});

/** Connects to `child` until it stops accepting (its accept() failed with EMFILE). */
async function holdEveryDescriptor(child: ChildBroker): Promise<Deno.Conn[]> {
  const held: Deno.Conn[] = [];
  for (let i = 0; i < 400; i++) {
    try {
      held.push(await Deno.connect({ hostname: "127.0.0.1", port: child.port }));
    } catch {
      break;
    }
  }
  return held;
}

/** Sends `req` once `child` listens again; a refused connection means its retry is pending. */
async function whenListening(child: ChildBroker, req: () => Promise<Response>): Promise<Response> {
  for (let attempt = 1;; attempt++) {
    const from = child.logs.length;
    const res = await req().catch(() => undefined);
    if (res) return res;
    assert(attempt < 10, `still not listening: ${child.logs.slice(-3)}`);
    await child.logged("listening again", from);
  }
}

Deno.test({
  name: "clients holding every file descriptor stop accepts; once they go the broker listens again",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const child = await start(dir, {}, [], 256);
      const held = await holdEveryDescriptor(child);
      try {
        await child.logged("stopped accepting connections; listening again");
      } finally {
        for (const c of held) c.close();
      }
      const res = await whenListening(
        child,
        () => fetch(`${child.url}/publish/after`, { method: "POST", body: "x" }),
      );
      assertEquals(res.status, 201, await res.text());
      await stop(child, "SIGTERM");
    }),
});

Deno.test({
  name: "a publish to a new topic while clients hold every descriptor waits, then lands",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const child = await start(dir, {}, [], 256);
      const early = await Deno.connect({ hostname: "127.0.0.1", port: child.port });
      const answer = (async () => {
        const buf = new Uint8Array(4096);
        const n = await early.read(buf);
        return new TextDecoder().decode(buf.subarray(0, n ?? 0));
      })();
      const failedAt = child.logs.length;
      const held = await holdEveryDescriptor(child);
      try {
        await child.logged("stopped accepting connections; listening again");
        // Listening again takes the descriptor the dead listener gave back: none is left now,
        // so the new topic's WAL file cannot be opened and the publish must wait, not fail.
        await child.logged("listening again", failedAt);
        const from = child.logs.length;
        await early.write(
          new TextEncoder().encode(
            "POST /publish/fresh HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
          ),
        );
        const first = await Promise.race([
          child.logged("WAL file cannot be opened yet: no file descriptor free", from)
            .then(() => "waited"),
          answer.then((text) => `answered at once: ${text.split("\r\n")[0]}`),
        ]);
        assertEquals(first, "waited");
      } finally {
        for (const c of held) c.close();
      }
      const text = await answer;
      early.close();
      assertMatch(text, /^HTTP\/1\.1 201/, text);
      const health = await whenListening(child, () => fetch(`${child.url}/healthz`));
      assertEquals(health.status, 200, await health.text());
      await stop(child, "SIGTERM");
    }),
});
