import { assert, assertEquals, assertMatch, assertThrows } from "../_support/assert.ts";
import {
  ALL_SCOPES,
  type ApiKey,
  checkNames,
  KeyRing,
  MAX_KEY_LENGTH,
  parseKeyFile,
  parseKeyList,
  SCOPE_BITS,
} from "../../lib/auth.ts";
import { ConfigError } from "../../lib/config.ts";
import { hashedKey } from "../../protocol/key_hash.ts";

const { publish, consume, metrics } = SCOPE_BITS;
/** `admin` reads the metrics too. */
const admin = SCOPE_BITS.admin | metrics;

/** What a test compares of parsed keys: the key and its scopes. */
const plain = (keys: ApiKey[]) => keys.map(({ key, scopes }) => ({ key, scopes }));

Deno.test("parseKeyList() reads comma-separated keys with scopes joined by +", () => {
  assertEquals(plain(parseKeyList("k1, k2:publish+consume,,k3:admin")), [
    { key: "k1", scopes: ALL_SCOPES },
    { key: "k2", scopes: publish | consume },
    { key: "k3", scopes: admin },
  ]);
  assertEquals(parseKeyList(""), []);
});

Deno.test("parseKeyFile() reads one key per line, scopes with , or +, skipping comments and blanks", () => {
  const text = "# ops\n\nalpha\r\n  beta:publish,consume  \ngamma:consume+admin\n#delta\n";
  assertEquals(plain(parseKeyFile(text)), [
    { key: "alpha", scopes: ALL_SCOPES },
    { key: "beta", scopes: publish | consume },
    { key: "gamma", scopes: consume | admin },
  ]);
});

Deno.test("parseKeyList() and parseKeyFile() name the setting and position, never the key", () => {
  const cases: [() => unknown, RegExp][] = [
    [
      () => parseKeyList("ok,hidden-secret:publsh"),
      /^BROKER_API_KEYS entry 2: unknown scope "publsh"/,
    ],
    [() => parseKeyList("hidden-secret:"), /^BROKER_API_KEYS entry 1: unknown scope ""/],
    [() => parseKeyList("hidden:hidden-part-2"), /^BROKER_API_KEYS entry 1: unknown scope \(not/],
    [() => parseKeyList(":publish"), /^BROKER_API_KEYS entry 1: a key is/],
    [
      () => parseKeyList("hidden-k:publish,consume"),
      /^BROKER_API_KEYS entry 2: "consume" looks like scopes, not a key: .*\(key:publish\+consume\)$/,
    ],
    [
      () => parseKeyList("hidden-k:publish,consume+admin"),
      /^BROKER_API_KEYS entry 2: "consume\+admin" looks like scopes.*\(key:publish\+consume\+admin\)$/,
    ],
    [
      () => parseKeyFile("hidden-k:publish\nmetrics+consume\n"),
      /^BROKER_API_KEYS_FILE line 2: "metrics\+consume" looks like scopes.*\(key:metrics\+consume\)$/,
    ],
    [() => parseKeyFile("ok\nhidden key:admin\n"), /^BROKER_API_KEYS_FILE line 2: a key is/],
    [() => parseKeyList("x".repeat(MAX_KEY_LENGTH + 1)), /a key is 1-512/],
  ];
  for (const [fn, re] of cases) {
    const e = assertThrows(fn);
    assert(e instanceof ConfigError, `${e}`);
    assertMatch(e.message, re);
    assert(!e.message.includes("hidden"), e.message);
  }
});

Deno.test("KeyRing.scopesOf() gives a key's scopes, 0 for anything else", () => {
  const ring = new KeyRing(parseKeyList("abc:publish,abcd,abc:consume"));
  assertEquals(ring.size, 2);
  assertEquals(ring.scopesOf("abc"), publish | consume, "a key listed twice gets both scopes");
  assertEquals(ring.scopesOf("abcd"), ALL_SCOPES);
  for (const wrong of ["", "ab", "abd", "abcde", "ABC", "abc ", "x".repeat(MAX_KEY_LENGTH + 1)]) {
    assertEquals(ring.scopesOf(wrong), 0, JSON.stringify(wrong));
  }
  ring.replace([]);
  assertEquals(ring.scopesOf("abc"), 0);
});

Deno.test("a sha256: entry is the key's digest: the ring finds the key, the file holds no secret", async () => {
  const entry = await hashedKey("s3cret-key");
  assertMatch(entry, /^sha256:[0-9a-f]{64}$/);
  const ring = new KeyRing(parseKeyFile(`${entry}:publish name=billing\nother:consume\n`));
  const found = ring.find("s3cret-key");
  assertEquals([found?.name, found?.scopes, found?.key], ["billing", publish, undefined]);
  assertEquals(ring.find("other")?.scopes, consume);
  assertEquals(ring.find("s3cret-kez"), undefined);
  // Written plain and hashed, a key is one key: scopes joined, the same default name.
  const upper = entry.replace(/[0-9a-f]{64}/, (h) => h.toUpperCase()); // hex in either case
  const both = new KeyRing(parseKeyList(`s3cret-key:publish,${upper}:admin`));
  assertEquals(both.size, 1);
  assertEquals(both.scopesOf("s3cret-key"), publish | admin);
  assertMatch(both.find("s3cret-key")!.name, /^key-[0-9a-f]{8}$/);
});

Deno.test("options set a key's name and publish limits; a bad one names the option, not the key", () => {
  const [k] = parseKeyFile("hidden-key:publish name=app-1 rate=250/s bytes=2MiB/s\n");
  assertEquals([k!.name, k!.limits], ["app-1", {
    messagesPerSecond: 250,
    bytesPerSecond: 2 ** 21,
  }]);
  const cases: [string, RegExp][] = [
    ["hidden-key rate=fast", /line 1: rate= takes messages a second/],
    ["hidden-key bytes=1MiB", /line 1: bytes= takes a size a second/],
    ["hidden-key name=no/slash", /line 1: name= takes 1-64/],
    ["hidden-key hiddenopt=1", /line 1: unknown option \(expected/],
    ["hidden key", /line 1: a key is 1-512/],
    ["sha256:hidden", /line 1: a sha256: entry is 64 hex digits/],
  ];
  for (const [line, re] of cases) {
    const e = assertThrows(() => parseKeyFile(line));
    assertMatch((e as Error).message, re);
    assert(!(e as Error).message.includes("hidden"), (e as Error).message);
  }
});

Deno.test("the metrics scope reads metrics only; admin includes it; no scopes is every scope", () => {
  const ring = new KeyRing(parseKeyList("mon:metrics,ops:admin,all"));
  assertEquals(ring.scopesOf("mon"), metrics);
  assertEquals(ring.scopesOf("ops") & metrics, metrics);
  assertEquals(ring.scopesOf("all"), ALL_SCOPES);
  assertEquals(ALL_SCOPES, publish | consume | admin);
  const e = assertThrows(() => parseKeyList("hidden:metric"));
  assertMatch((e as Error).message, /expected publish, consume, admin or metrics/);
});

Deno.test("checkNames() refuses two keys of one name, naming both entries and never a key", () => {
  const cases: [string, string, RegExp][] = [
    [
      "",
      "hidden-1 name=ops\nhidden-2 name=ops\n",
      /^BROKER_API_KEYS_FILE line 2: .*"ops".*line 1\)/,
    ],
    [
      "hidden-1:admin name=ops",
      "hidden-2 name=ops\n",
      /line 1: .*"ops".*BROKER_API_KEYS entry 1\)/,
    ],
  ];
  for (const [list, file, re] of cases) {
    const e = assertThrows(() => checkNames([...parseKeyList(list), ...parseKeyFile(file)]));
    assert(e instanceof ConfigError, `${e}`);
    assertMatch(e.message, re);
    assert(!e.message.includes("hidden"), e.message);
  }
  // A key's default name is taken too.
  const [plainKey] = parseKeyList("hidden-3");
  assertThrows(() => checkNames([plainKey!, ...parseKeyFile(`hidden-4 name=${plainKey!.name}`)]));
  // The same key twice under one name is one key; default names differ between keys.
  checkNames(parseKeyList("hidden-5:publish,hidden-5:consume,hidden-6,hidden-7"));
  checkNames(parseKeyFile("hidden-8 name=a\nhidden-8:admin name=a\n"));
});
