/**
 * Runs the whole suite: installs what the tests need (tools/setup_test_deps.sh), runs
 * `deno test`, echoes its output and ends with the line `N passed, N failed, N skipped`.
 * Extra arguments go to `deno test` (e.g. a file or `--filter`).
 */

const deno = Deno.execPath();
const setup = new Deno.Command("bash", { args: ["tools/setup_test_deps.sh"] });
const setupOut = await setup.output();
if (!setupOut.success) {
  console.error(new TextDecoder().decode(setupOut.stderr));
  console.error("tools/setup_test_deps.sh failed; tests that need its tools will fail");
}

const args = Deno.args.length ? Deno.args : ["tests/"];
const child = new Deno.Command(deno, {
  args: ["test", "-A", "--parallel", ...args],
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
const passed = m ? Number(m[1]) : 0;
const failed = m ? Number(m[3]) : (code === 0 ? 0 : 1);
const skipped = m?.[5] ? Number(m[5]) : 0;
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
Deno.exit(code);
