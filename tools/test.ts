/**
 * Runs the whole suite: installs what the tests need (tools/setup_test_deps.sh), runs
 * `deno test`, then the Go client's tests, vet and gofmt (tools/go_tests.ts), echoes their output
 * and ends with the line `N passed, N failed, N skipped` over both.
 * Extra arguments go to `deno test` (e.g. a file or `--filter`); the Go checks run only without
 * arguments or when one of them is `clients/go` (`deno task test clients/go` runs only those).
 */

import { type Counts, runGoTests } from "./go_tests.ts";

const isGo = (arg: string) => /^(\.\/)?clients\/go\/?$/.test(arg);
const denoArgs = Deno.args.filter((arg) => !isGo(arg));
const runGo = Deno.args.length === 0 || Deno.args.some(isGo);
const runDeno = Deno.args.length === 0 || denoArgs.length > 0;

/** Runs `deno test` (on tests/ without arguments), echoing its output, counted from its summary. */
async function runDenoTests(args: string[]): Promise<Counts> {
  const setup = new Deno.Command("bash", { args: ["tools/setup_test_deps.sh"] });
  const setupOut = await setup.output();
  if (!setupOut.success) {
    console.error(new TextDecoder().decode(setupOut.stderr));
    console.error("tools/setup_test_deps.sh failed; tests that need its tools will fail");
  }
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--parallel", ...(args.length ? args : ["tests/"])],
    env: { NO_COLOR: "1", DENO_JOBS: Deno.env.get("DENO_JOBS") ?? "2" },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let tail = "";
  const decoder = new TextDecoder();
  for await (const chunk of child.stdout) {
    await Deno.stdout.write(chunk);
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4096);
  }
  const { code } = await child.status;
  const m =
    /(?:ok|FAILED) \| (\d+) passed(?: \((\d+) steps?\))? \| (\d+) failed(?: \((\d+) steps?\))?(?: \| (\d+) ignored)?/
      .exec(tail);
  return {
    passed: m ? Number(m[1]) : 0,
    failed: m ? Number(m[3]) || (code === 0 ? 0 : 1) : (code === 0 ? 0 : 1),
    skipped: m?.[5] ? Number(m[5]) : 0,
  };
}

const total: Counts = { passed: 0, failed: 0, skipped: 0 };
for (const counts of [runDeno && await runDenoTests(denoArgs), runGo && await runGoTests()]) {
  if (!counts) continue;
  total.passed += counts.passed;
  total.failed += counts.failed;
  total.skipped += counts.skipped;
}
console.log(`${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
Deno.exit(total.failed ? 1 : 0);
