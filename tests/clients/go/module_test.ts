/**
 * The Go client as a Go user gets it before the repository is public: a new module in a temp
 * dir, set up by the very commands of docs/go-client.md "Install" (with `/path/to/ferry` made
 * this checkout), then a program importing `github.com/ferrymq/ferry/clients/go` is tidied,
 * vetted and run. coder/websocket comes through the module proxy (the Go cache is warm).
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import { blocksOf } from "../../docs/markdown.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const MODULE = "github.com/ferrymq/ferry/clients/go";
const GO_TIMEOUT_MS = 180_000;

/** `go` from PATH, else the usual install. */
async function findGo(): Promise<string> {
  try {
    const out = await new Deno.Command("go", { args: ["version"], stdout: "null", stderr: "null" })
      .output();
    if (out.success) return "go";
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return "/usr/local/go/bin/go";
}

/** Runs `cmd args` in dir; throws with its output when it fails, else returns its stdout. */
async function run(cmd: string, args: string[], dir: string, env: Record<string, string>) {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: dir,
    env,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(GO_TIMEOUT_MS),
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed:\n${stdout}${stderr}`);
  return stdout;
}

/** The Install section's block that sets up a new module (the one with `go mod init`). */
async function installCommands(): Promise<string[]> {
  const page = await Deno.readTextFile(`${ROOT}docs/go-client.md`);
  const install = page.slice(
    page.indexOf("## Install"),
    page.indexOf("\n## ", page.indexOf("## Install") + 1),
  );
  const block = blocksOf(install).find((b) =>
    b.lang === "sh" && b.lines.some((l) => l.startsWith("go mod init"))
  );
  assert(block, 'docs/go-client.md "Install" has no sh block with `go mod init`');
  return block.lines.filter((l) => l.trim() !== "");
}

const PROGRAM = `package main

import (
	"fmt"

	ferry "${MODULE}"
)

func main() {
	c, err := ferry.New("")
	if err != nil {
		panic(err)
	}
	fmt.Println(ferry.Version, c.URL())
}
`;

Deno.test("docs/go-client.md Install builds a new module against clients/go", async () => {
  const go = await findGo();
  const dir = await Deno.makeTempDir({ prefix: "ferry-go-module-" });
  try {
    const env = { GOFLAGS: "-mod=mod", NO_COLOR: "1" };
    for (const line of await installCommands()) {
      await run(
        "sh",
        ["-ec", line.replaceAll("/path/to/ferry", ROOT.replace(/\/$/, ""))],
        dir,
        env,
      );
    }
    const before = await Deno.readTextFile(`${dir}/go.mod`);
    assert(before.includes(`${MODULE} v0.0.0`), `go.mod after the Install steps:\n${before}`);
    await Deno.writeTextFile(`${dir}/main.go`, PROGRAM);
    await run(go, ["mod", "tidy"], dir, env);
    const after = await Deno.readTextFile(`${dir}/go.mod`);
    assert(after.includes(`require ${MODULE} v0.0.0\n`), `go.mod after go mod tidy:\n${after}`);
    assert(!after.includes("00010101000000"), `a placeholder version in go.mod:\n${after}`);
    await run(go, ["vet", "./..."], dir, env);
    const printed = await run(go, ["run", "."], dir, env);
    const version = /const Version = "([^"]+)"/.exec(
      await Deno.readTextFile(`${ROOT}clients/go/client.go`),
    )?.[1];
    assertEquals(printed, `${version} http://127.0.0.1:7800\n`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
