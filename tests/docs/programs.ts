/**
 * A page's ```ts and ```go blocks run as programs against the page's broker: TypeScript with
 * `deno run --check --allow-net -` from the repository's root (as a reader of the docs runs it),
 * Go as `package main` in a module of its own that uses ./clients/go. Each must exit 0 (a ts
 * program with nothing on stderr); a ```output block right after it must match what it printed.
 */

import { ROOT } from "./markdown.ts";
import { matches } from "./shown.ts";

const TS_TIMEOUT_MS = 30_000;
const GO_TIMEOUT_MS = 120_000;
const GO_FALLBACK = "/usr/local/go/bin/go";

/** The page's code with the documented address made the page's broker. */
function pointAt(code: string, brokerUrl: string): string {
  const host = new URL(brokerUrl).host;
  return code.replace(/\b(?:localhost|127\.0\.0\.1):7800\b/g, host);
}

/** Why the output does not match, or undefined. */
function outputMismatch(printed: string, shown: string | undefined): string | undefined {
  if (shown === undefined || matches(shown, printed)) return undefined;
  return `output:\n  real:\n${printed}\n  shown:\n${shown}`;
}

/** Runs a ts block; what is wrong, or undefined. */
export async function runTs(code: string, brokerUrl: string, shown?: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", "--check", "--allow-net", "-"],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    signal: AbortSignal.timeout(TS_TIMEOUT_MS),
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(pointAt(code, brokerUrl)));
  await w.close();
  const out = await child.output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success || stderr) return `exit ${out.code}\nstdout:\n${stdout}\nstderr:\n${stderr}`;
  return outputMismatch(stdout, shown);
}

let goBin: Promise<string> | undefined;
/** `go` from PATH, else the usual install. */
function findGo(): Promise<string> {
  return goBin ??= new Deno.Command("go", { args: ["version"], stdout: "null", stderr: "null" })
    .output().then((o) => (o.success ? "go" : GO_FALLBACK), () => GO_FALLBACK);
}

async function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, {
    args,
    cwd,
    env,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(GO_TIMEOUT_MS),
  }).output();
  const d = new TextDecoder();
  return {
    ok: out.success,
    code: out.code,
    stdout: d.decode(out.stdout),
    stderr: d.decode(out.stderr),
  };
}

/** A Go module for a page's programs, one directory each, using the client from the checkout. */
export class GoModule {
  #dir: string;
  #tidy = false;
  #n = 0;
  constructor(dir: string) {
    this.#dir = dir;
  }

  /** Runs a go block; what is wrong, or undefined. */
  async run(code: string, brokerUrl: string, shown?: string): Promise<string | undefined> {
    const go = await findGo();
    const client = `${ROOT}clients/go`;
    const pkg = `ex${++this.#n}`;
    await Deno.mkdir(`${this.#dir}/${pkg}`, { recursive: true });
    await Deno.writeTextFile(`${this.#dir}/${pkg}/main.go`, pointAt(code, brokerUrl));
    if (!this.#tidy) {
      await Deno.writeTextFile(
        `${this.#dir}/go.mod`,
        `module docs.example\n\ngo 1.24\n\nrequire github.com/ferrymq/ferry/clients/go v0.0.0\n\n` +
          `replace github.com/ferrymq/ferry/clients/go => ${client}\n`,
      );
      await Deno.copyFile(`${client}/go.sum`, `${this.#dir}/go.sum`);
    }
    // Tidy again for each program: a later one may import what the first did not.
    const tidy = await run(go, ["mod", "tidy"], this.#dir);
    if (!tidy.ok) return `go mod tidy: ${tidy.stderr}`;
    this.#tidy = true;
    const out = await run(go, ["run", `./${pkg}`], this.#dir, { FERRY_URL: brokerUrl });
    if (!out.ok) return `exit ${out.code}\nstdout:\n${out.stdout}\nstderr:\n${out.stderr}`;
    return outputMismatch(out.stdout, shown);
  }
}
