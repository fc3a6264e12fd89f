/**
 * `ferry` never hands a terminal the control characters of a payload or of other text the broker
 * sends: peek, consume, tail and error lines show them as escapes (docs/cli.md),
 * and --json output carries them as JSON `\u` escapes only.
 */

import { nextSubscriber, startBroker, withLiveBroker } from "../_support/server.ts";
import { ferry, spawnFerry } from "../_support/cli.ts";
import { assert, assertEquals } from "../_support/assert.ts";
import { call, publish } from "../_support/http.ts";
import type { MessageJson } from "../../protocol/wire.ts";

/** ESC and CSI turn a terminal red, DEL and CR rub out, C1 CSI (U+009B) does on some terminals. */
const PAYLOAD = "ok\x1b[31mRED\x9b2J\x7f\rover\nline two\tend\x00";
/** How people see it: escapes, newlines and tabs kept. */
const SHOWN = "ok\\x1b[31mRED\\x9b2J\\x7f\\rover\nline two\tend\\x00";
/** Controls a terminal acts on, other than the newline and tab people need. */
// deno-lint-ignore no-control-regex
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

/** Asserts `text` holds no control character a terminal would act on. */
function assertInert(text: string, what: string): void {
  const m = RAW_CONTROL.exec(text);
  assert(!m, `${what} holds U+${m?.[0].charCodeAt(0).toString(16).padStart(4, "0")}: ${text}`);
}

Deno.test("ferry peek and consume show a payload's control characters as escapes", () =>
  withLiveBroker(async ({ url }) => {
    await publish(url, "orders", PAYLOAD);
    const peek = await ferry(["peek", "orders"], { url });
    assertEquals(peek.code, 0, peek.stderr);
    assertInert(peek.stdout, "peek");
    assertEquals(peek.stdout.split("\n").slice(1).join("\n"), `${SHOWN}\n`);

    const consume = await ferry(["consume", "orders", "--no-ack"], { url });
    assertEquals(consume.code, 0, consume.stderr);
    assertInert(consume.stdout, "consume");
    assert(consume.stdout.includes(SHOWN), consume.stdout);

    // A requeue reason comes back in the message's header line, escaped there too.
    const [msg] = (await call(url, "GET", "/api/queues/inflight?queue=orders")).body;
    const rq = await call(url, "POST", "/requeue", {
      json: { id: msg.id, topic: "orders", reason: "bad\x1b]0;owned\x07sku\nsecond line" },
    });
    assertEquals(rq.status, 200, rq.text);
    const again = await ferry(["peek", "orders"], { url });
    assertInert(again.stdout, "peek after requeue");
    assert(
      again.stdout.split("\n")[0]!.endsWith("reason: bad\\x1b]0;owned\\x07sku\\nsecond line"),
      again.stdout,
    );
  }));

Deno.test("ferry --json carries control characters as JSON escapes, the payload unchanged", () =>
  withLiveBroker(async ({ url }) => {
    await publish(url, "orders", PAYLOAD);
    const r = await ferry(["--json", "consume", "orders"], { url });
    assertEquals(r.code, 0, r.stderr);
    assertInert(r.stdout, "--json consume");
    assert(r.stdout.includes("\\u009b") && r.stdout.includes("\\u007f"), r.stdout);
    const [msg] = JSON.parse(r.stdout) as MessageJson[];
    assertEquals(msg!.payload_text, PAYLOAD);
  }));

Deno.test("ferry tail shows control characters as escapes", async () => {
  const b = await startBroker();
  const opened = nextSubscriber(b.broker, "orders");
  const tail = spawnFerry(["tail", "orders"], { url: b.url });
  try {
    await opened;
    await publish(b.url, "orders", PAYLOAD);
    await tail.until(() => tail.out.some((l) => l.startsWith("line two")), "the payload");
    const text = tail.out.join("\n");
    assertInert(text, "tail");
    assert(text.includes("ok\\x1b[31mRED\\x9b2J\\x7f\\rover"), text);
  } finally {
    assertEquals(await tail.stop(), 0);
    await b.close();
  }
});

Deno.test("an error line shows the broker's detail with its control characters escaped", () =>
  withLiveBroker(async ({ url }) => {
    const r = await ferry(["publish", "a\x1b[31mb", "x"], { url });
    assertEquals(r.code, 1);
    assertInert(r.stderr.trimEnd(), "stderr");
    assert(r.stderr.includes('"a\\x1b[31mb"'), r.stderr);
  }));
