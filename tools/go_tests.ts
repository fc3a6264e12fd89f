/**
 * The Go client's checks for tools/test.ts: `go test -race -count=2 -json ./...` with the broker
 * tests required (FERRY_TEST_BROKER=require), `go test ./...` as a Go user without Deno runs it
 * (FERRY_TEST_BROKER=off), `go vet ./...` and `gofmt -l .` in clients/go, their output echoed,
 * the tests counted from the JSON events. docs/go-client.md "Testing" describes the switch.
 */

/** Where the Go client lives; its module root. */
const GO_DIR = new URL("../clients/go/", import.meta.url).pathname;
/** Where CI machines have Go when PATH lacks it. */
const GO_FALLBACK = "/usr/local/go/bin/go";

/** Test results: a top-level test, subtest or example counts once. */
export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/** One line of `go test -json` (cmd/test2json's TestEvent), the fields used here. */
interface TestEvent {
  Action?: string;
  Test?: string;
  Output?: string;
}

/** Counts the `pass`/`fail`/`skip` events that name a test; package-level events are left out. */
export function countGoEvents(events: Iterable<TestEvent>): Counts {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const e of events) {
    if (!e.Test) continue;
    if (e.Action === "pass") counts.passed++;
    else if (e.Action === "fail") counts.failed++;
    else if (e.Action === "skip") counts.skipped++;
  }
  return counts;
}

/** The first of `go` on PATH and GO_FALLBACK that runs, or undefined. */
async function findGo(): Promise<string | undefined> {
  for (const go of ["go", GO_FALLBACK]) {
    try {
      const out = await new Deno.Command(go, { args: ["version"], stdout: "null", stderr: "null" })
        .output();
      if (out.success) return go;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
  return undefined;
}

/** Runs `cmd args` in clients/go, echoing its output; true when it succeeds with no output. */
async function quiet(cmd: string, args: string[], env: Record<string, string>): Promise<boolean> {
  const out = await new Deno.Command(cmd, { args, cwd: GO_DIR, env }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (text.trim()) console.log(text.trimEnd());
  return out.success && !text.trim();
}

/**
 * Runs the Go client's tests, vet and gofmt, echoing their output; a missing `go`, a package
 * that fails with no failed test (build error, TestMain, timeout), a vet or a gofmt complaint
 * each count as one failure.
 */
export async function runGoTests(): Promise<Counts> {
  const go = await findGo();
  if (!go) {
    console.log(`go not found (tried "go" on PATH and ${GO_FALLBACK}): Go client tests not run`);
    return { passed: 0, failed: 1, skipped: 0 };
  }
  // The tests start the broker with `deno`: the one running this suite, whatever PATH says.
  const denoDir = Deno.execPath().replace(/\/[^/]*$/, "");
  const env = { NO_COLOR: "1", PATH: `${denoDir}:${Deno.env.get("PATH") ?? ""}` };
  // Twice, under the race detector: state one run leaves behind must not break the next.
  console.log(`\n${go} test -race -count=2 ./... (in clients/go)`);
  const child = new Deno.Command(go, {
    args: ["test", "-race", "-count=2", "-json", "./..."],
    cwd: GO_DIR,
    env: { ...env, FERRY_TEST_BROKER: "require" },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const events: TestEvent[] = [];
  const decoder = new TextDecoder();
  let rest = "";
  const echo = async (line: string) => {
    if (!line) return;
    let event: TestEvent | undefined;
    try {
      event = JSON.parse(line);
    } catch {
      event = undefined;
    }
    if (event) events.push(event);
    const text = event ? event.Output ?? "" : line + "\n";
    if (text) await Deno.stdout.write(new TextEncoder().encode(text));
  };
  for await (const chunk of child.stdout) {
    const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
    rest = lines.pop()!;
    for (const line of lines) await echo(line);
  }
  await echo(rest);
  const { success } = await child.status;
  const counts = countGoEvents(events);
  if (!success && counts.failed === 0) {
    console.log("go test failed outside any test (see above)");
    counts.failed = 1;
  }
  // What a Go user without Deno runs: the broker tests skip, everything else passes.
  console.log(`${go} test ./... without a broker (FERRY_TEST_BROKER=off)`);
  const alone = await new Deno.Command(go, {
    args: ["test", "-count=1", "./..."],
    cwd: GO_DIR,
    env: { ...env, FERRY_TEST_BROKER: "off" },
  }).output();
  if (!alone.success) {
    console.log(new TextDecoder().decode(alone.stdout) + new TextDecoder().decode(alone.stderr));
    console.log("go test ./... failed without a broker (see above)");
    counts.failed++;
  }
  if (!await quiet(go, ["vet", "./..."], env)) {
    console.log("go vet ./... complained (see above)");
    counts.failed++;
  }
  const goroot = new TextDecoder().decode(
    (await new Deno.Command(go, { args: ["env", "GOROOT"], stdout: "piped" }).output()).stdout,
  ).trim();
  if (!await quiet(`${goroot}/bin/gofmt`, ["-l", "."], env)) {
    console.log("gofmt -l . lists files to format (see above): run gofmt -w . in clients/go");
    counts.failed++;
  }
  return counts;
}
