/**
 * @module The Go client's bench program (clients/go/internal/bench): built once with
 * `go build`, then run for the Go publish and drain rows.
 */

import { tempDir, track } from "./cleanup.ts";
import { join, ROOT } from "./plan.ts";

/** Where CI machines have Go when PATH lacks it (as tools/go_tests.ts). */
export const GO_FALLBACK = "/usr/local/go/bin/go";
let goBinary: Promise<string> | undefined;

/** Builds clients/go/internal/bench once (`go build -o <temp>`); resolves with its path. */
export function goBench(): Promise<string> {
  goBinary ??= (async () => {
    const out = join(await tempDir("ferry-bench-go-"), "bench");
    for (const go of ["go", GO_FALLBACK]) {
      let r: Deno.CommandOutput;
      try {
        r = await new Deno.Command(go, {
          args: ["build", "-o", out, "./internal/bench"],
          cwd: join(ROOT, "clients/go"),
          stdout: "piped",
          stderr: "piped",
        }).output();
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) continue;
        throw e;
      }
      if (!r.success) throw new Error(`go build failed: ${new TextDecoder().decode(r.stderr)}`);
      return out;
    }
    throw new Error(`go not found (on PATH or at ${GO_FALLBACK})`);
  })();
  return goBinary;
}

/** Runs the Go bench program with `args`; resolves with the JSON line it printed. */
export async function runGo(args: string[]) {
  const bin = await goBench();
  const out = await track(
    new Deno.Command(bin, { args, stdin: "null", stdout: "piped", stderr: "piped" }).spawn(),
  ).output();
  if (!out.success) {
    throw new Error(`go bench ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "{}");
}
