import { assert, assertEquals, assertMatch, assertThrows } from "../_support/assert.ts";
import {
  ALL_SCOPES,
  KeyRing,
  MAX_KEY_LENGTH,
  parseKeyFile,
  parseKeyList,
  SCOPE_BITS,
} from "../../lib/auth.ts";
import { ConfigError } from "../../lib/config.ts";

const { publish, consume, admin } = SCOPE_BITS;

Deno.test("parseKeyList() reads comma-separated keys with scopes joined by +", () => {
  assertEquals(parseKeyList("k1, k2:publish+consume,,k3:admin"), [
    { key: "k1", scopes: ALL_SCOPES },
    { key: "k2", scopes: publish | consume },
    { key: "k3", scopes: admin },
  ]);
  assertEquals(parseKeyList(""), []);
});

Deno.test("parseKeyFile() reads one key per line, scopes with , or +, skipping comments and blanks", () => {
  const text = "# ops\n\nalpha\r\n  beta:publish,consume  \ngamma:consume+admin\n#delta\n";
  assertEquals(parseKeyFile(text), [
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
      /^BROKER_API_KEYS entry 2: "consume" is a scope/,
    ],
    [() => parseKeyFile("ok\nhid den:admin\n"), /^BROKER_API_KEYS_FILE line 2: a key is/],
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
