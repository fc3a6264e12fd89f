/**
 * The webhook egress policy: unspecified addresses always refused; built-in denials of loopback,
 * link-local, site-local and metadata addresses, lifted only by an allow entry inside them;
 * operators' deny and allow ranges; IPv4, IPv6, and IPv6 forms embedding IPv4 judged as it.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../../_support/assert.ts";
import { EgressPolicy, isInternal, LOOPBACK_ALLOW } from "../../../lib/push/egress.ts";

/** The host of a URL as the broker sees it (the WHATWG parser normalises IPv4 spellings). */
const hostOf = (url: string) => new URL(url).hostname;

/** Every spelling of "this host, any address" the security review registered. */
const UNSPECIFIED_URLS = [
  "http://0.0.0.0:21101/",
  "http://0:21101/",
  "http://0x0:21101/",
  "http://00000000:21101/",
  "http://0.0.0.0.:21101/",
  "http://[::]:21103/",
  "http://[0::]:21103/",
  "http://[::0.0.0.0]:21103/",
  "http://[::ffff:0.0.0.0]:21101/",
  "http://[::ffff:0:0]:21101/",
];

Deno.test("EgressPolicy: unspecified addresses are refused in every spelling, whatever the settings", () => {
  const policies = [
    new EgressPolicy(),
    new EgressPolicy("", "0.0.0.0/0,::/0"),
    new EgressPolicy("", "0.0.0.0/8,::/128"),
    new EgressPolicy("", `${LOOPBACK_ALLOW},0.0.0.0/0,::/0`),
  ];
  for (const p of policies) {
    for (const url of UNSPECIFIED_URLS) {
      assertMatch(
        p.refusal(hostOf(url)) ?? "allowed",
        /is unspecified \((0\.0\.0\.0\/8|::\/128)\)/,
        url,
      );
    }
    // A name resolving to 0.0.0.0 (or ::).
    assertMatch(p.refusalOf(["0.0.0.0"]) ?? "allowed", /0\.0\.0\.0 is unspecified/);
    assertMatch(p.refusalOf(["::"]) ?? "allowed", /:: is unspecified/);
    assertMatch(
      new EgressPolicy().refusalOf(["203.0.113.9", "0.0.0.0"])!,
      /0\.0\.0\.0 is unspecified/,
    );
    assertMatch(p.refusal("0.1.2.3") ?? "allowed", /unspecified \(0\.0\.0\.0\/8\)/);
  }
});

Deno.test("EgressPolicy: by default loopback, link-local, site-local and metadata are refused, private allowed", () => {
  const p = new EgressPolicy();
  for (
    const a of [
      "127.0.0.1",
      "127.9.9.9",
      "::1",
      "[::1]",
      "::ffff:127.0.0.1",
      "169.254.169.254",
      "169.254.170.2",
      "fe80::1",
      "fe80::1%eth0",
      "fec0::1",
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
      "10.1.2.3",
      "192.168.0.10",
      "172.16.5.4",
      "100.64.0.1",
      "fd12::1",
      "203.0.113.9",
      "2001:db8::1",
    ]
  ) {
    assertEquals(p.refusal(a), undefined, a);
  }
  assertEquals(
    p.refusal("127.0.0.1"),
    "127.0.0.1 is loopback; BROKER_WEBHOOK_ALLOW must name it (e.g. 127.0.0.0/8) to allow it",
  );
  assertEquals(
    p.refusal("::1"),
    "::1 is loopback; BROKER_WEBHOOK_ALLOW must name it (e.g. ::1) to allow it",
  );
  assertMatch(
    p.refusal("169.254.169.254")!,
    /link-local or a metadata address; .*169\.254\.0\.0\/16/,
  );
  assertMatch(p.refusal("fec0::1")!, /site-local/);
});

Deno.test("EgressPolicy: IPv6 forms that embed an IPv4 address are judged as that address", () => {
  const p = new EgressPolicy();
  // The review's forms of 169.254.169.254, and the same kinds for loopback.
  for (
    const [url, kind] of [
      ["http://[64:ff9b::a9fe:a9fe]/", "NAT64"] as const,
      ["http://[64:ff9b::169.254.169.254]/", "NAT64"],
      ["http://[2002:a9fe:a9fe::]/", "6to4"],
      ["http://[::a9fe:a9fe]/", "IPv4-compatible"],
      ["http://[::ffff:0:a9fe:a9fe]/", "SIIT"],
      // Local-use NAT64 (64:ff9b:1::/48): each RFC 6052 layout the prefix may use.
      ["http://[64:ff9b:1:a9fe:a9:fe00::]/", "NAT64"], // /48
      ["http://[64:ff9b:1:a9:fe:a9fe::]/", "NAT64"], // /56
      ["http://[64:ff9b:1:0:a9:fea9:fe00:0]/", "NAT64"], // /64
      ["http://[64:ff9b:1::a9fe:a9fe]/", "NAT64"], // /96
    ]
  ) {
    assertMatch(
      p.refusal(hostOf(url)) ?? "allowed",
      new RegExp(`embeds 169\\.254\\.169\\.254 \\(${kind}\\), which is link-local`),
      url,
    );
  }
  for (
    const url of ["http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://[::127.0.0.1]/"]
  ) {
    assertMatch(p.refusal(hostOf(url)) ?? "allowed", /embeds 127\.0\.0\.1 .* is loopback/, url);
  }
  for (const url of ["http://[64:ff9b::]/", "http://[2002::1]/", "http://[::ffff:0:0:0]/"]) {
    assertMatch(p.refusal(hostOf(url)) ?? "allowed", /embeds 0\.0\.0\.0 .* is unspecified/, url);
  }
  assertMatch(p.refusal("64:ff9b:1::") ?? "allowed", /embeds 0\.0\.0\.0 .* is unspecified/);
  // A public IPv4 address behind NAT64 or 6to4 is allowed, as the address itself is.
  assertEquals(p.refusal("64:ff9b:1::cb00:7109"), undefined, "local-use, /96 layout");
  assertEquals(p.refusal("64:ff9b:1:cb00:71:900::"), undefined, "local-use, /48 layout");
  assertEquals(p.refusal("64:ff9b::808:808"), undefined);
  assertEquals(p.refusal("2002:cb00:7109::1"), undefined);
  // Against the operator's lists too: deny by the IPv4 range, allow by it.
  const deny = new EgressPolicy("10.0.0.0/8");
  assertMatch(
    deny.refusal("64:ff9b::a00:1")!,
    /embeds 10\.0\.0\.1 \(NAT64\), which is in BROKER_WEBHOOK_DENY/,
  );
  assertMatch(
    new EgressPolicy("2002::/16").refusal("2002:cb00:7109::1")!,
    /BROKER_WEBHOOK_DENY \(2002::\/16\)/,
  );
  const allow = new EgressPolicy("", "203.0.113.0/24");
  assertEquals(allow.refusal("64:ff9b::cb00:7109"), undefined);
  assertMatch(
    allow.refusal("64:ff9b::808:808")!,
    /embeds 8\.8\.8\.8 .* not in BROKER_WEBHOOK_ALLOW/,
  );
});

Deno.test("EgressPolicy: only an allow entry inside a built-in denial lifts it; 0.0.0.0/0 and ::/0 do not", () => {
  const all = new EgressPolicy("", "0.0.0.0/0,::/0");
  for (const a of ["127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "fe80::1", "fec0::1"]) {
    assert(all.refusal(a)?.includes("BROKER_WEBHOOK_ALLOW must name it"), a);
  }
  assertEquals(all.refusal("8.8.8.8"), undefined);
  const local = new EgressPolicy("", LOOPBACK_ALLOW);
  assertEquals([local.refusal("127.0.0.1"), local.refusal("127.3.2.1"), local.refusal("::1")], [
    undefined,
    undefined,
    undefined,
  ]);
  assertMatch(local.refusal("8.8.8.8")!, /not in BROKER_WEBHOOK_ALLOW/, "only what ALLOW holds");
  assertMatch(local.refusal("169.254.169.254")!, /link-local/);
  const both = new EgressPolicy("", `${LOOPBACK_ALLOW},0.0.0.0/0,::/0`);
  for (const a of ["127.0.0.1", "::1", "8.8.8.8", "2001:db8::1", "10.0.0.1"]) {
    assertEquals(both.refusal(a), undefined, a);
  }
  assert(both.refusal("169.254.169.254") !== undefined);
  const one = new EgressPolicy("", "127.0.0.1,169.254.169.254");
  assertEquals([one.refusal("127.0.0.1"), one.refusal("169.254.169.254")], [undefined, undefined]);
  assert(one.refusal("127.0.0.2") !== undefined && one.refusal("169.254.170.2") !== undefined);
});

Deno.test("EgressPolicy: BROKER_WEBHOOK_DENY wins; BROKER_WEBHOOK_ALLOW limits to its ranges", () => {
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

Deno.test("EgressPolicy.summary() names what is refused and how loopback is opened", () => {
  const closed = new EgressPolicy("10.0.0.0/8").summary();
  assertEquals(closed.refused, [
    "0.0.0.0/8",
    "::/128",
    "127.0.0.0/8",
    "::1",
    "169.254.0.0/16",
    "fe80::/10",
    "fec0::/10",
    "fd00:ec2::254",
    "100.100.100.200",
    "10.0.0.0/8",
  ]);
  assertEquals(closed.allowed, "any other address");
  assertMatch(String(closed.loopback), /refused; BROKER_WEBHOOK_ALLOW=127\.0\.0\.0\/8,::1/);
  const open = new EgressPolicy("", `${LOOPBACK_ALLOW},0.0.0.0/0`).summary();
  assert(!(open.refused as string[]).includes("127.0.0.0/8"));
  assertEquals(open.allowed, ["127.0.0.0/8", "::1", "0.0.0.0/0"]);
  assertEquals(open.loopback, "allowed by BROKER_WEBHOOK_ALLOW");
});

Deno.test("isInternal: loopback, private, link-local and what embeds them; public addresses are not", () => {
  for (
    const a of [
      "127.0.0.1",
      "::1",
      "[::1]",
      "10.1.2.3",
      "172.31.0.1",
      "192.168.1.1",
      "100.64.0.1",
      "fd12::1",
      "169.254.1.1",
      "fe80::1",
      "0.0.0.0",
      "::",
      "64:ff9b::a00:1",
      "2002:c0a8:101::",
    ]
  ) {
    assert(isInternal(a), a);
  }
  for (const a of ["203.0.113.9", "8.8.8.8", "2001:db8::1", "64:ff9b::808:808", "172.32.0.1"]) {
    assert(!isInternal(a), a);
  }
});
