/**
 * How `ferry` starts and ends: exit codes 1 (refused), 2 (usage), 3 (cannot connect) with one
 * line on stderr; --url / --api-key over FERRY_URL / FERRY_API_KEY; colour only on a terminal
 * and never with NO_COLOR.
 */

import { startBroker } from "../_support/server.ts";
import { ferry, ferryOnTerminal, ferryPermissions, hasAnsi } from "../_support/cli.ts";
import { assert, assertEquals, assertMatch } from "../_support/assert.ts";

/** A loopback port nothing listens on: bound, then let go. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = l.addr as Deno.NetAddr;
  l.close();
  return port;
}

/** Asserts exit `code`, nothing on stdout and exactly `stderr` (a string or a pattern). */
function assertFails(
  r: { code: number; stdout: string; stderr: string },
  code: number,
  stderr: string | RegExp,
): void {
  assertEquals(r.code, code, `stderr: ${r.stderr}`);
  assertEquals(r.stdout, "");
  if (typeof stderr === "string") assertEquals(r.stderr, stderr);
  else assertMatch(r.stderr, stderr);
  assertEquals(r.stderr.split("\n").length, 2, "one line on stderr");
  assert(!/\bat .*\.ts:\d+/.test(r.stderr), "no stack trace");
}

Deno.test("usage errors exit 2 with one line: unknown command, unknown flag, missing argument", async () => {
  const url = `http://127.0.0.1:${freePort()}`; // never reached: usage is checked first
  assertFails(
    await ferry(["pubish", "orders"], { url }),
    2,
    /^ferry: unknown command 'pubish' \(Did you mean publish\?\); see ferry --help\n$/,
  );
  assertFails(
    await ferry(["consume", "orders", "--bogus"], { url }),
    2,
    "ferry: unknown option '--bogus'; see ferry --help\n",
  );
  assertFails(
    await ferry(["consume"], { url }),
    2,
    "ferry: missing required argument 'topic'; see ferry --help\n",
  );
  assertFails(await ferry([], { url }), 2, "ferry: Missing a command; see ferry --help\n");
  assertFails(await ferry(["topic"], { url }), 2, "ferry: Missing a command; see ferry --help\n");
  assertFails(
    await ferry(["topic", "create"], { url }),
    2,
    /^ferry: missing required argument 'name'/,
  );
  assertFails(
    await ferry(["publish", "orders"], { url }),
    2,
    "ferry: Nothing to publish: give the data, -f FILE… or - to read stdin\n",
  );
  assertFails(
    await ferry(["publish", "orders", "x", "-f", "a.json"], { url }),
    2,
    /^ferry: Give the data as an argument, as -f FILE… or as - for stdin, not both\n$/,
  );
});

Deno.test("bad flag values exit 2 before anything is sent: durations, limit, priority, header, URL", async () => {
  const url = `http://127.0.0.1:${freePort()}`;
  const badDuration =
    "is invalid. Expected an integer and a unit ms, s, m or h, like 30s; see ferry --help\n";
  assertFails(
    await ferry(["publish", "orders", "x", "--ttl", "5x"], { url }),
    2,
    `ferry: option '--ttl <duration>' argument '5x' ${badDuration}`,
  );
  assertFails(
    await ferry(["publish", "orders", "x", "--delay", "1.5s"], { url }),
    2,
    `ferry: option '--delay <duration>' argument '1.5s' ${badDuration}`,
  );
  assertFails(
    await ferry(["consume", "orders", "--wait", "soon"], { url }),
    2,
    `ferry: option '--wait <duration>' argument 'soon' ${badDuration}`,
  );
  assertFails(
    await ferry(["topic", "create", "t", "--retain", "1d"], { url }),
    2,
    `ferry: option '--retain <duration>' argument '1d' ${badDuration}`,
  );
  assertFails(
    await ferry(["requeue", "t", "id", "--delay", "-1s"], { url }),
    2,
    /^ferry: option '--delay <duration>' argument '-1s' is invalid/,
  );
  assertFails(
    await ferry(["consume", "orders", "--limit", "0"], { url }),
    2,
    /^ferry: option '--limit <n>' argument '0' is invalid. Expected a whole number from 1 to 1000/,
  );
  assertFails(
    await ferry(["publish", "orders", "x", "--priority", "urgent"], { url }),
    2,
    /^ferry: option '--priority <priority>' argument 'urgent' is invalid. Allowed choices are high, normal, low/,
  );
  assertFails(
    await ferry(["publish", "orders", "x", "--header", "Trace: 1"], { url }),
    2,
    /^ferry: option '--header <header>' argument 'Trace: 1' is invalid. Expected 'X-MQ-Name: value'/,
  );
  assertFails(
    await ferry(["topics"], { url: "ftp://example" }),
    2,
    'ferry: Invalid FERRY_URL "ftp://example": expected an http:// or https:// URL like http://127.0.0.1:7800\n',
  );
  assertFails(
    await ferry(["topics", "--url", "nope"], { url }),
    2,
    /^ferry: Invalid --url "nope": /,
  );
});

Deno.test("nothing listening exits 3 with what to do", async () => {
  const url = `http://127.0.0.1:${freePort()}`;
  const expected =
    `ferry: Cannot connect to ${url}: connection refused; start the broker or point --url / FERRY_URL at it\n`;
  assertFails(await ferry(["topics"], { url }), 3, expected);
  assertFails(await ferry(["--json", "publish", "orders", "x"], { url }), 3, expected);
  assertFails(await ferry(["consume", "orders", "--follow"], { url }), 3, expected);
  assertFails(await ferry(["tail", "orders"], { url }), 3, expected);
});

Deno.test("the broker's refusals exit 1 with its detail: a bad topic name, a missing topic", async () => {
  const b = await startBroker();
  try {
    assertFails(
      await ferry(["consume", "bad name"], { url: b.url }),
      1,
      'ferry: Invalid topic name "bad name": use 1-200 characters of A-Z a-z 0-9 . _ -, not starting with "." and without ".."\n',
    );
    assertFails(
      await ferry(["publish", "a..b", "x"], { url: b.url }),
      1,
      /^ferry: Invalid topic name "a\.\.b"/,
    );
    assertFails(
      await ferry(["topic", "purge", "missing"], { url: b.url }),
      1,
      `ferry: Cannot purge "missing": no such queue; \`ferry topics\` lists what there is\n`,
    );
  } finally {
    await b.close();
  }
});

Deno.test("--url and --api-key win over FERRY_URL and FERRY_API_KEY", async () => {
  const b = await startBroker({ apiKeys: "right-key" });
  const dead = `http://127.0.0.1:${freePort()}`;
  try {
    const env = (key: string) => ({ FERRY_API_KEY: key });
    // The environment alone.
    assertEquals((await ferry(["topics"], { url: b.url, env: env("right-key") })).code, 0);
    // A flag over the environment, both ways round.
    assertEquals(
      (await ferry(["topics", "--url", b.url], { url: dead, env: env("right-key") })).code,
      0,
    );
    assertEquals(
      (await ferry(["--url", dead, "topics"], { url: b.url, env: env("right-key") })).code,
      3,
    );
    assertEquals(
      (await ferry(["topics", "--api-key", "right-key"], { url: b.url, env: env("wrong") })).code,
      0,
    );
    assertFails(
      await ferry(["topics", "--api-key", "wrong"], { url: b.url, env: env("right-key") }),
      1,
      /^ferry: .*; set FERRY_API_KEY or pass --api-key\n$/,
    );
    assertFails(
      await ferry(["topics"], { url: b.url }),
      1,
      /; set FERRY_API_KEY or pass --api-key\n$/,
    );
  } finally {
    await b.close();
  }
});

Deno.test("FERRY_URL defaults to http://127.0.0.1:7800", async () => {
  const r = await ferry(["topics"], { env: {} });
  // Whatever listens there (usually nothing), the URL in a connection failure names the default.
  if (r.code === 3) assertMatch(r.stderr, /^ferry: Cannot connect to http:\/\/127\.0\.0\.1:7800: /);
});

Deno.test("colour only on a terminal, never with NO_COLOR or --json", async () => {
  const b = await startBroker();
  try {
    await ferry(["publish", "orders", "x", "--priority", "high"], { url: b.url });
    const piped = await ferry(["topics"], { url: b.url });
    assert(!hasAnsi(piped.stdout), "a pipe gets no escapes");
    const tty = await ferryOnTerminal(["topics"], { url: b.url });
    assertEquals(tty.code, 0, tty.stdout);
    assert(hasAnsi(tty.stdout), `a terminal gets colour: ${JSON.stringify(tty.stdout)}`);
    const noColor = await ferryOnTerminal(["topics"], { url: b.url, env: { NO_COLOR: "1" } });
    assert(!hasAnsi(noColor.stdout), `NO_COLOR wins: ${JSON.stringify(noColor.stdout)}`);
    const json = await ferryOnTerminal(["--json", "peek", "orders"], { url: b.url });
    assert(!hasAnsi(json.stdout), "--json has no escapes");
    assertEquals(JSON.parse(json.stdout)[0].payload_text, "x");
  } finally {
    await b.close();
  }
});

Deno.test("a progress bar on a terminal when publishing several files", async () => {
  const b = await startBroker();
  const dir = await Deno.makeTempDir({ prefix: "ferry-cli-" });
  try {
    for (const n of [1, 2, 3]) await Deno.writeTextFile(`${dir}/m${n}.txt`, `m${n}`);
    const r = await ferryOnTerminal([
      "publish",
      "orders",
      "-f",
      `${dir}/m1.txt`,
      `${dir}/m2.txt`,
      `${dir}/m3.txt`,
    ], { url: b.url });
    assertEquals(r.code, 0, r.stdout);
    assertMatch(r.stdout, /publishing .* \d\/3 files/);
    assertMatch(r.stdout, /Published 3 files to "orders"/);
  } finally {
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** The page that tells users how to install `ferry`. */
const CLI_PAGE = new URL("../../docs/cli.md", import.meta.url);

/** The words of the page's `deno install -g` command, its `\` continuation lines joined. */
async function installWords(): Promise<string[]> {
  const page = await Deno.readTextFile(CLI_PAGE);
  const m = /^deno install -g(?:[^\n]*\\\n)*[^\n]*$/m.exec(page);
  assert(m, "docs/cli.md shows a deno install -g command");
  return m[0].replaceAll("\\\n", " ").split(/\s+/).filter(Boolean);
}

Deno.test("docs/cli.md's install command grants exactly the `ferry` task's permissions", async () => {
  const granted = (await installWords()).filter((w) => /^--(allow|deny)-/.test(w));
  assertEquals(granted, ferryPermissions());
});

Deno.test("docs/cli.md's install command installs a `ferry` that runs", async () => {
  const root = new URL("../../", import.meta.url).pathname;
  const words = await installWords();
  const dir = await Deno.makeTempDir({ prefix: "ferry-install-" });
  try {
    // The documented line, with --root so it installs into the temp dir, not the user's home.
    const args = [...words.slice(1, 3), "--root", dir, ...words.slice(3)];
    const install = await new Deno.Command(Deno.execPath(), {
      args,
      cwd: root,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(install.code, 0, new TextDecoder().decode(install.stderr));
    const path = `${dir}/bin:${Deno.execPath().replace(/\/[^/]+$/, "")}:${Deno.env.get("PATH")}`;
    const b = await startBroker();
    try {
      const run = await new Deno.Command(`${dir}/bin/ferry`, {
        args: ["--json", "publish", "orders", "installed"],
        env: { PATH: path, FERRY_URL: b.url },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const dec = new TextDecoder();
      assertEquals(run.code, 0, dec.decode(run.stderr));
      assertEquals(JSON.parse(dec.decode(run.stdout)).topic, "orders");
    } finally {
      await b.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("`deno task ferry` reads -f paths from the directory it was run in", async () => {
  const config = new URL("../../deno.json", import.meta.url).pathname;
  const dir = await Deno.makeTempDir({ prefix: "ferry-task-" });
  const b = await startBroker();
  try {
    await Deno.writeTextFile(`${dir}/here.json`, '{"from":"cwd"}');
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "task",
        "--quiet",
        "--config",
        config,
        "ferry",
        "--json",
        "publish",
        "t",
        "-f",
        "here.json",
      ],
      cwd: dir,
      // Cleared: an INIT_CWD already set (npx and an outer `deno task` set one) would be kept.
      clearEnv: true,
      env: { ...denoEnv(), NO_COLOR: "1", FERRY_URL: b.url },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    assertEquals(out.code, 0, dec.decode(out.stderr));
    assertEquals(JSON.parse(dec.decode(out.stdout))[0].file, "here.json");
  } finally {
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** What Deno needs to find its cache, and nothing else of this process's environment. */
function denoEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["HOME", "DENO_DIR", "XDG_CACHE_HOME"]) {
    const v = Deno.env.get(name);
    if (v !== undefined) env[name] = v;
  }
  return env;
}
