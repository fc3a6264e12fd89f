/**
 * Addresses and ranges as numbers: IPv4 mapped into IPv6, the forms of one address agreeing,
 * range containment, and the IPv4 address each embedding IPv6 form stands for.
 */

import { assert, assertEquals } from "../../_support/assert.ts";
import {
  addressValue,
  embeddedV4,
  formatV4,
  inside,
  isAddress,
  parseCidr,
} from "../../../lib/push/address_range.ts";

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

Deno.test("inside: a range within another, IPv4 and IPv6 alike", () => {
  const r = (t: string) => parseCidr(t)!;
  assert(inside(r("127.0.0.1"), r("127.0.0.0/8")));
  assert(inside(r("127.0.0.0/8"), r("127.0.0.0/8")));
  assert(inside(r("::ffff:127.0.0.1"), r("127.0.0.0/8")));
  assert(!inside(r("0.0.0.0/0"), r("127.0.0.0/8")));
  assert(!inside(r("::/0"), r("::1")));
  assert(inside(r("127.0.0.0/8"), r("::/0")));
});

Deno.test("embeddedV4: the IPv4 address of each embedding form; none for others", () => {
  const of = (a: string) => {
    const e = embeddedV4(addressValue(a)!);
    return e && [e.kind, ...e.addresses.map(formatV4)];
  };
  assertEquals(of("::7f00:1"), ["IPv4-compatible", "127.0.0.1"]);
  assertEquals(of("::ffff:0:7f00:1"), ["SIIT", "127.0.0.1"]);
  assertEquals(of("64:ff9b::7f00:1"), ["NAT64", "127.0.0.1"]);
  assertEquals(of("2002:7f00:1:ab::1"), ["6to4", "127.0.0.1"]);
  assertEquals(of("64:ff9b:1::7f00:1")?.slice(0, 1), ["NAT64"]);
  assert(of("64:ff9b:1::7f00:1")!.includes("127.0.0.1"), "the /96 layout");
  for (const a of ["::", "::1", "::ffff:127.0.0.1", "127.0.0.1", "2001:db8::1", "fe80::1"]) {
    assertEquals(of(a), undefined, a);
  }
});
