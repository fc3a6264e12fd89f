/**
 * One broker per data directory, with real processes: a second broker on the directory of a
 * running one exits 1 with one line naming the directory and the holder's pid, without touching
 * a file in it, and the first keeps serving and loses nothing; a SIGKILLed holder leaves no lock
 * behind.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { runMain, start, stop, withDataDir } from "../_support/child.ts";
import { drain, publish } from "../_support/http.ts";

/** Every file of `dir` with its size, modification time and bytes. */
async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const e of Deno.readDir(dir)) {
    if (!e.isFile) continue;
    const path = `${dir}/${e.name}`;
    const { size, mtime } = await Deno.stat(path);
    const bytes = await Deno.readFile(path);
    const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    out[e.name] = `${size} bytes, mtime ${mtime?.getTime()}, sha256 ${sum.toHex()}`;
  }
  return out;
}

Deno.test({
  name: "a second broker on a data dir in use exits 1 with one line and touches no file in it",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const first = await start(dir);
      const acked: string[] = [];
      for (let i = 0; i < 5; i++) acked.push((await publish(first, "orders", `before-${i}`)).id);
      const files = await filesOf(dir);
      assert(Object.keys(files).some((f) => f.endsWith(".wal")), JSON.stringify(files));

      // Another port (`deno task dev` beside `deno task start`), and the same port (a start
      // that would fail on "address in use" only after reading the directory).
      for (const port of ["0", String(first.port)]) {
        const second = await runMain({ dataDir: dir, args: ["--port", port] });
        const what = `--port ${port}: exit ${second.code}\n${second.stderr}`;
        assertEquals(second.code, 1, what);
        const lines = second.stderr.trim().split("\n");
        assertEquals(lines.length, 1, what);
        assert(lines[0]!.startsWith("ferry: "), what);
        assert(lines[0]!.includes(`"${await Deno.realPath(dir)}"`), what);
        assert(lines[0]!.includes(`pid ${first.process.pid}`), what);
        assertEquals(await filesOf(dir), files, `the second broker changed the dir (${what})`);
      }

      for (let i = 0; i < 5; i++) acked.push((await publish(first, "orders", `after-${i}`)).id);
      // SIGKILL: the kernel drops the lock with the process, and the next start takes it.
      assertEquals((await stop(first, "SIGKILL")).signal, "SIGKILL");
      const next = await start(dir);
      const back = (await drain(next, "orders", "auto_ack=true")).map((m) => m.id);
      assertEquals(back, acked);
      assertEquals((await stop(next, "SIGTERM")).code, 0);
    }),
});
