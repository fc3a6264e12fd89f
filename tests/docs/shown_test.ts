import { assert, assertEquals } from "../_support/assert.ts";
import { httpMismatch, matches, parseCurlOutput, parseShownHttp } from "./shown.ts";
import { commandsOf } from "./shell.ts";

Deno.test("shown: … stands for any text, the rest must be exact", () => {
  assert(matches(`{"id":"…","topic":"orders"}`, `{"id":"0193-ab","topic":"orders"}`));
  assert(!matches(`{"id":"…","topic":"orders"}`, `{"id":"0193","topic":"jobs"}`));
  assert(!matches(`{"id":"…"}`, `{"id":"1","extra":true}`), "a field not shown fails");
  assert(matches("a\n…\nz", "a\nb\nc\nz"), "… spans lines");
  assert(matches("table  \n", "table\n\n"), "trailing spaces and newlines do not count");
  assert(!matches("(1+1)", "11"), "shown text is literal, not a pattern");
});

Deno.test("shown: a curl answer is a status and a body over continued lines, or curl -i's head", () => {
  assertEquals(parseShownHttp(['201 {"a":1,', '    "b":2}']), {
    status: 201,
    headers: [],
    body: '{"a":1,"b":2}',
  });
  assertEquals(parseShownHttp(["204"]), { status: 204, headers: [], body: undefined });
  assertEquals(parseShownHttp(["long-polls up to 10 s"]), undefined);
  const shown = parseShownHttp(["HTTP/1.1 401 Unauthorized", "www-authenticate: Bearer …", "{…}"])!;
  const answer = parseCurlOutput(
    'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm="ferry"\r\n\r\n{"status":401}',
    401,
  );
  assertEquals(httpMismatch(shown, answer), undefined);
  assert(httpMismatch({ ...shown, headers: ["x-missing: 1"] }, answer)?.includes("x-missing"));
  assert(httpMismatch({ status: 200, headers: [] }, answer)?.includes("status 401"));
});

Deno.test("shell: commands carry on over \\, quotes and heredocs; comments after one are its answer", () => {
  const commands = commandsOf([
    "# prose before",
    "curl -X POST localhost:7800/publish/a \\",
    "  -d 'x'",
    "# 201 {…}",
    "",
    "# prose after a blank line",
    "curl -d '{",
    '  "a": 1}\' localhost:7800/x   # 200',
    "cat > f <<'EOF'",
    "# not a comment",
    "EOF",
  ]);
  assertEquals(commands.map((c) => [c.first, c.last, c.shown]), [
    [1, 2, ["201 {…}"]],
    [6, 7, ["200"]],
    [8, 10, []],
  ]);
});
