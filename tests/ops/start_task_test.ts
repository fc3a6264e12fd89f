/**
 * The real `deno task start` (deno.json through tools/start.sh): a data dir and a keys file
 * outside `./data`, named by settings or by flags, just work with permissions scoped to them; the
 * broker is the task's own child, so signals reach it and its exit status is the task's; Deno
 * warns of nothing at shutdown; on a fresh clone it installs only the npm packages the broker
 * imports; and run by hand without those permissions, the broker names the setting and the fix
 * in one line.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { type LogLine, MAIN, parseLogLine, readLines } from "../_support/child.ts";
import { call } from "../_support/http.ts";
import { startTaskPermissions } from "../_support/start_task.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const KEY = "task-key-1";

/** `deno task start …args` in the repository, resolved once it logs "listening". */
async function startTask(args: string[], env: Record<string, string>) {
  const process = new Deno.Command(Deno.execPath(), {
    args: ["task", "start", "--port", "0", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const waiters = new Map<string, (rec: LogLine) => void>();
  const ended = readLines(process.stderr, (line) => {
    lines.push(line);
    const rec = parseLogLine(line);
    if (rec?.msg && waiters.has(rec.msg)) waiters.get(rec.msg)!(rec);
  });
  /** Resolves with the next log line whose `msg` is `msg`; rejects if the task ends first. */
  const next = (msg: string) =>
    Promise.race([
      new Promise<LogLine>((res) => waiters.set(msg, res)),
      ended.then(() => Promise.reject(new Error(`no "${msg}" line:\n${lines.join("\n")}`))),
    ]);
  const port = Number((await next("listening")).port);
  const children = await Deno.readTextFile(`/proc/${process.pid}/task/${process.pid}/children`);
  const [broker, ...others] = children.trim().split(" ").map(Number);
  assertEquals(others, [], "the task runs one process");
  const argv = (await Deno.readTextFile(`/proc/${broker}/cmdline`)).split("\0");
  return { process, lines, next, ended, url: `http://127.0.0.1:${port}`, broker: broker!, argv };
}

/** The log line with `msg`, once the task's stderr has it. */
function logged(lines: string[], msg: string) {
  return lines.map(parseLogLine).find((l) => l?.msg === msg);
}

Deno.test({
  name: "deno task start uses a data dir and keys file outside ./data, from settings or flags",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "ferry-task-" });
    const keys = await Deno.makeTempFile({ prefix: "ferry-task-keys-" });
    await Deno.writeTextFile(keys, `${KEY}:publish+consume+admin\n`);
    const auth = { headers: { authorization: `Bearer ${KEY}` } };
    try {
      const first = await startTask([], { BROKER_DATA_DIR: dir, BROKER_API_KEYS_FILE: keys });
      // Signals to the task reach the broker, from the moment it says it listens: SIGHUP reloads
      // the keys (SIGTERM, below, stops it cleanly).
      const reloaded = first.next("api keys reloaded");
      first.process.kill("SIGHUP");
      await reloaded;
      // The launcher exec'd Deno: the task's child is the broker itself, with scoped permissions.
      assertEquals(first.argv[1], "run", first.argv.join(" "));
      for (const flag of [`--allow-read=${dir}`, `--allow-write=${dir}`, `--allow-read=${keys}`]) {
        assert(first.argv.includes(flag), `no ${flag}: ${first.argv.join(" ")}`);
      }
      assert(!first.argv.some((a) => /^(-A|--allow-all|--allow-(read|write))$/.test(a)));
      assertEquals(logged(first.lines, "listening")?.data_dir, dir);
      assertEquals(
        (await call(first, "POST", "/publish/outside", { body: "a", ...auth })).status,
        201,
      );
      assertEquals((await call(first, "POST", "/publish/outside", { body: "b" })).status, 401);

      first.process.kill("SIGTERM");
      assertEquals((await first.process.status).code, 0, first.lines.join("\n"));
      await first.ended;
      assert(logged(first.lines, "stopped"), first.lines.join("\n"));
      // main.ts's default export { fetch } (for `deno serve main.ts`) draws no warning from Deno.
      const warned = first.lines.filter((l) => l.includes("deno serve"));
      assertEquals(warned, [], first.lines.join("\n"));

      // The flags, which win over the settings, get the same permissions.
      const flagged = await startTask(["--data-dir", dir, `--api-keys-file=${keys}`], {
        BROKER_DATA_DIR: "./elsewhere",
      });
      assertEquals(logged(flagged.lines, "listening")?.data_dir, dir);
      const got = await call(flagged, "GET", "/consume/outside?auto_ack=true", auth);
      assertEquals([got.status, got.body?.payload_text], [200, "a"]);
      // SIGKILL of the broker's pid ends the broker, and with it the task.
      Deno.kill(flagged.broker, "SIGKILL");
      assertEquals((await flagged.process.status).code, 137);
      await flagged.ended;
      assert(!(await Deno.lstat(`${ROOT}/elsewhere`).catch(() => undefined)), "made ./elsewhere");
    } finally {
      await Deno.remove(dir, { recursive: true });
      await Deno.remove(keys);
    }
  },
});

/** main.ts run by hand with the start task's own permissions, which name no data dir. */
async function runByHand(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...startTaskPermissions(), MAIN, "--port", "0", ...args],
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr).trim() };
}

Deno.test("main.ts without permission for its data dir or keys file says which setting, and the fix", async () => {
  const dir = "/var/lib/ferry-not-granted";
  const data = await runByHand(["--data-dir", dir]);
  assertEquals(data.code, 1, data.stderr);
  assertEquals(
    data.stderr,
    `ferry: cannot read BROKER_DATA_DIR "${dir}": permission denied by Deno; run with deno task ` +
      `start, or add --allow-read=${dir} --allow-write=${dir}`,
  );
  const keys = await runByHand(["--data-dir", ":memory:", "--api-keys-file", "/etc/ferry/keys"]);
  assertEquals(keys.code, 1, keys.stderr);
  assertEquals(
    keys.stderr,
    `ferry: cannot read BROKER_API_KEYS_FILE "/etc/ferry/keys": permission denied by Deno; run ` +
      `with deno task start, or add --allow-read=/etc/ferry/keys`,
  );
});

/** Copies the repository to `to`, without what a fresh clone lacks (node_modules, data, dist). */
async function copyClone(from: string, to: string): Promise<void> {
  for await (const e of Deno.readDir(from)) {
    if ([".git", "node_modules", "data", "dist"].includes(e.name)) continue;
    if (e.isDirectory) {
      await Deno.mkdir(`${to}/${e.name}`);
      await copyClone(`${from}/${e.name}`, `${to}/${e.name}`);
    } else if (e.isFile) await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
  }
}

Deno.test("deno task start on a fresh clone installs only the npm packages main.ts imports", async () => {
  const clone = await Deno.makeTempDir({ prefix: "ferry-clone-" });
  try {
    await copyClone(ROOT.replace(/\/$/, ""), clone);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "start", "--help"],
      cwd: clone,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
    const installed = (await Array.fromAsync(Deno.readDir(`${clone}/node_modules`)))
      .map((e) => e.name).filter((n) => !n.startsWith(".")).sort();
    assertEquals(installed, ["prom-client", "swagger-ui-dist"]);
    assertEquals(
      await Deno.readTextFile(`${clone}/deno.lock`),
      await Deno.readTextFile(`${ROOT}/deno.lock`),
    );
  } finally {
    await Deno.remove(clone, { recursive: true });
  }
});
