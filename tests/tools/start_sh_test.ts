/**
 * tools/start.sh on the README's npx route: with no `deno` on the PATH (only Node and npx, as
 * `go test` in clients/go runs it), it runs the Deno that `npx -y deno@2.9.6` fetches, as the
 * broker's own process.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { MAIN, parseLogLine, readLines } from "../_support/child.ts";
import { startTask, startTaskPermissions } from "../_support/start_task.ts";

/** The directory of `name` on this PATH, or undefined. */
function which(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/${name}`).isFile) return `${dir}/${name}`;
    } catch { /* not here */ }
  }
  return undefined;
}

/** What start.sh and npx call besides themselves: a shell and a few POSIX tools. */
const TOOLS = ["node", "npx", "sh", "env", "sed", "tr"];

Deno.test({
  name: "tools/start.sh with no deno on the PATH runs npx's Deno, which is the broker's pid",
  ignore: which("npx") === undefined,
  fn: async () => {
    const bin = await Deno.makeTempDir({ prefix: "ferry-nodeonly-" });
    try {
      for (const tool of TOOLS) {
        const path = which(tool);
        assert(path, `${tool} not found on the PATH`);
        await Deno.symlink(await Deno.realPath(path), `${bin}/${tool}`);
      }
      const { env, launcher } = startTask();
      const [cmd, ...script] = launcher;
      const process = new Deno.Command(`${bin}/${cmd}`, {
        args: [...script, "deno", "run", ...startTaskPermissions(), MAIN, "--port", "0"],
        env: { ...env, PATH: bin, BROKER_DATA_DIR: ":memory:", NO_COLOR: "1" },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const lines: string[] = [];
      let listening!: () => void;
      const listened = new Promise<void>((res) => listening = res);
      const ended = readLines(process.stderr, (line) => {
        lines.push(line);
        if (parseLogLine(line)?.msg === "listening") listening();
      });
      try {
        await Promise.race([
          listened,
          process.status.then(() => {
            throw new Error(`start.sh exited before listening:\n${lines.join("\n")}`);
          }),
        ]);
        const exe = await Deno.realPath(`/proc/${process.pid}/exe`);
        assert(exe.endsWith("/deno"), `the pid runs ${exe}, not Deno`);
      } finally {
        process.kill("SIGTERM");
        await ended;
      }
      assertEquals((await process.status).code, 0, lines.join("\n"));
    } finally {
      await Deno.remove(bin, { recursive: true });
    }
  },
});
