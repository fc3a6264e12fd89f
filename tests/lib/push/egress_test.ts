/**
 * The webhook egress policy: built-in denials of link-local and metadata addresses, operators'
 * deny and allow ranges, IPv4, IPv6 and IPv4-mapped IPv6 alike.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../../_support/assert.ts";
import { addressValue, EgressPolicy, isAddress } from "../../../lib/push/egress.ts";

Deno.test("EgressPolicy: by default link-local and metadata addresses are refused, loopback and private allowed", () => {
  const p = new EgressPolicy();
  for (
    const a of [
      "169.254.169.254",
      "169.254.170.2",
      "fe80::1",
      "fe80::1%eth0",
      "fd00:ec2::254",
      "100.100.100.200",
      "::ffff:169.254.169.254",
      "[::ffff:a9fe:a9fe]",
    ]
  ) {
    assert(p.refusal(a) !== undefined, `${a} allowed`);
  }
  for (
    const a of [
      "127.0.0.1",
      "::1",
      "10.1.2.3",
      "192.168.0.10",
      "172.16.5.4",
      "fd12::1",
      "203.0.113.9",
      "2001:db8::1",
    ]
  ) {
    assertEquals(p.refusal(a), undefined, a);
  }
  assertMatch(
    p.refusal("169.254.169.254")!,
    /link-local or a metadata address \(169\.254\.0\.0\/16\)/,
  );
});

Deno.test("EgressPolicy: BROKER_WEBHOOK_DENY wins; BROKER_WEBHOOK_ALLOW limits to its ranges and may re-allow a built-in", () => {
  const deny = new EgressPolicy("127.0.0.0/8, ::1, 10.0.0.0/8");
  assertMatch(deny.refusal("127.0.0.1")!, /BROKER_WEBHOOK_DENY \(127\.0\.0\.0\/8\)/);
  assertMatch(deny.refusal("::ffff:10.9.9.9")!, /10\.0\.0\.0\/8/);
  assert(deny.refusal("::1") !== undefined);
  assertEquals(deny.refusal("192.168.1.1"), undefined);
  const allow = new EgressPolicy("10.0.0.5", "10.0.0.0/8,169.254.10.0/24");
  assertEquals(allow.refusal("10.200.0.1"), undefined);
  assertMatch(allow.refusal("10.0.0.5")!, /BROKER_WEBHOOK_DENY/, "deny wins over allow");
  assertMatch(allow.refusal("192.168.1.1")!, /not in BROKER_WEBHOOK_ALLOW/);
  assertEquals(allow.refusal("169.254.10.7"), undefined, "named in the allow list");
  assert(allow.refusal("169.254.169.254") !== undefined);
  assertEquals(
    new EgressPolicy().refusalOf(["10.0.0.1", "169.254.169.254"])?.startsWith("169.254.169.254"),
    true,
    "one bad address refuses the name",
  );
});

Deno.test("EgressPolicy: a bad range names the setting and the entry", () => {
  for (
    const [deny, allow, re] of [
      ["10.0.0.0/33", "", /BROKER_WEBHOOK_DENY: "10\.0\.0\.0\/33"/],
      ["", "example.com", /BROKER_WEBHOOK_ALLOW: "example\.com"/],
      ["256.1.1.1", "", /BROKER_WEBHOOK_DENY/],
      ["fe80:::1", "", /BROKER_WEBHOOK_DENY/],
      ["10.0.0.0/8x", "", /BROKER_WEBHOOK_DENY/],
    ] as const
  ) {
    assertMatch(assertThrows(() => new EgressPolicy(deny, allow)).message, re);
  }
});

Deno.test("addressValue: IPv4 maps into IPv6; forms of one address agree; names are not addresses", () => {
  assertEquals(addressValue("1.2.3.4"), addressValue("::ffff:1.2.3.4"));
  assertEquals(addressValue("::ffff:0102:0304"), addressValue("1.2.3.4"));
  assertEquals(addressValue("2001:db8::1"), addressValue("2001:0db8:0:0:0:0:0:1"));
  assertEquals(addressValue("::"), 0n);
  for (const t of ["example.com", "1.2.3", "01.2.3.4", "1:2:3:4:5:6:7:8:9", "::1::"]) {
    assert(!isAddress(t), t);
  }
  assert(isAddress("[::1]"));
});
