/**
 * @module IP addresses and ranges as 128-bit numbers, for the webhook egress policy
 * (lib/push/egress.ts): IPv4 held as IPv4-mapped IPv6 (`::ffff:0:0/96`), so one range test
 * serves both families, and the IPv4 address an IPv6 one embeds (IPv4-compatible, SIIT, NAT64,
 * 6to4), which routes to that IPv4 address and is judged as it (docs/security.md "Webhook
 * targets").
 */

/** A range: its first address and prefix length, IPv4 held as IPv4-mapped IPv6. */
export interface Cidr {
  text: string;
  base: bigint;
  bits: number;
}

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const MAPPED = 0xffff00000000n;
const LOW_32 = 0xffffffffn;

function v4(text: string): bigint | undefined {
  const m = V4.exec(text);
  if (!m) return undefined;
  let n = 0n;
  for (const part of m.slice(1)) {
    const b = Number(part);
    if (b > 255 || (part.length > 1 && part.startsWith("0"))) return undefined;
    n = (n << 8n) | BigInt(b);
  }
  return MAPPED | n;
}

function v6(text: string): bigint | undefined {
  const zone = text.indexOf("%");
  let s = zone < 0 ? text : text.slice(0, zone);
  let tail: bigint | undefined; // an embedded IPv4 in the last 32 bits
  const lastColon = s.lastIndexOf(":");
  if (s.slice(lastColon + 1).includes(".")) {
    const four = v4(s.slice(lastColon + 1));
    if (four === undefined) return undefined;
    tail = four & LOW_32;
    s = s.slice(0, lastColon + 1) + "0:0";
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => h === "" ? [] : h.split(":");
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  let n = 0n;
  for (const g of all) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
    n = (n << 16n) | BigInt(parseInt(g, 16));
  }
  return tail === undefined ? n : (n & ~LOW_32) | tail;
}

/** An IP address as a 128-bit number (IPv4 mapped), or undefined when it is not one. */
export function addressValue(text: string): bigint | undefined {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  return bare.includes(":") ? v6(bare) : v4(bare);
}

/** Whether `text` is an IP address literal (`[…]` for IPv6 as in a URL). */
export function isAddress(text: string): boolean {
  return addressValue(text) !== undefined;
}

/** Whether `value` is an IPv4 address (held IPv4-mapped). */
export function isV4(value: bigint): boolean {
  return value >> 32n === 0xffffn;
}

/** The dotted form of an IPv4 address held IPv4-mapped. */
export function formatV4(value: bigint): string {
  const n = Number(value & LOW_32);
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/** `10.0.0.0/8`, `fd00::/8` or a single address; undefined when `entry` is none of these. */
export function parseCidr(entry: string): Cidr | undefined {
  const slash = entry.indexOf("/");
  const addr = slash < 0 ? entry : entry.slice(0, slash);
  const value = addressValue(addr);
  if (value === undefined) return undefined;
  const family = !addr.includes(":");
  const max = family ? 32 : 128;
  const prefixText = slash < 0 ? undefined : entry.slice(slash + 1);
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  const bits = family ? 96 + prefix : prefix;
  return { text: entry, base: value & mask(bits), bits };
}

function mask(bits: number): bigint {
  return bits === 0 ? 0n : ((1n << BigInt(bits)) - 1n) << BigInt(128 - bits);
}

/** Whether range `c` holds `value`. */
export function holds(c: Cidr, value: bigint): boolean {
  return (value & mask(c.bits)) === c.base;
}

/** Whether range `inner` lies wholly inside range `outer`. */
export function inside(inner: Cidr, outer: Cidr): boolean {
  return inner.bits >= outer.bits && holds(outer, inner.base);
}

/** The IPv4 addresses an IPv6 one stands for, and how it embeds them. */
export interface Embedded {
  /** "IPv4-compatible", "SIIT", "NAT64" or "6to4". */
  kind: string;
  /** IPv4 addresses, held IPv4-mapped: more than one where the layout is the operator's choice. */
  addresses: bigint[];
}

const range = (text: string) => parseCidr(text)!;
const COMPATIBLE = range("::/96");
const SIIT = range("::ffff:0:0:0/96");
const NAT64 = range("64:ff9b::/96");
const NAT64_LOCAL = range("64:ff9b:1::/48");
const SIX_TO_FOUR = range("2002::/16");
const UNSPECIFIED_V6 = 0n;
const LOOPBACK_V6 = 1n;

/** The IPv4 address after the first `prefix` bits of `value`, laid out as RFC 6052 says. */
function rfc6052(value: bigint, prefix: number): bigint {
  // Section 2.2: the 32 bits follow the prefix, skipping the octet of bits 64–71 (always 0).
  let out = 0n;
  let bit = prefix;
  for (let taken = 0; taken < 32; bit++) {
    if (bit >= 64 && bit < 72) continue;
    out = (out << 1n) | ((value >> BigInt(127 - bit)) & 1n);
    taken++;
  }
  return MAPPED | out;
}

/**
 * The IPv4 address(es) an IPv6 `value` embeds, or undefined when it embeds none: `::/96` but
 * `::` and `::1` (IPv4-compatible), `::ffff:0:0:0/96` (SIIT), `64:ff9b::/96` (NAT64),
 * `64:ff9b:1::/48` (local-use NAT64: each layout of RFC 6052 its prefix may use, /48 to /96,
 * that does not read a 0.x.x.x address),
 * `2002::/16` (6to4, bits 16–47). IPv4-mapped addresses are IPv4 already.
 */
export function embeddedV4(value: bigint): Embedded | undefined {
  if (isV4(value)) return undefined;
  if (holds(COMPATIBLE, value)) {
    if (value === UNSPECIFIED_V6 || value === LOOPBACK_V6) return undefined;
    return { kind: "IPv4-compatible", addresses: [MAPPED | (value & LOW_32)] };
  }
  if (holds(SIIT, value)) return { kind: "SIIT", addresses: [MAPPED | (value & LOW_32)] };
  if (holds(NAT64, value)) return { kind: "NAT64", addresses: [MAPPED | (value & LOW_32)] };
  if (holds(NAT64_LOCAL, value)) {
    // Read with another layout, an address's zero octets give 0.x.x.x: skip those.
    const all = [48, 56, 64, 96].map((p) => rfc6052(value, p));
    const read = [...new Set(all.filter((v) => (v & 0xff000000n) !== 0n))];
    return { kind: "NAT64", addresses: read.length ? read : [all[3]!] };
  }
  if (holds(SIX_TO_FOUR, value)) {
    return { kind: "6to4", addresses: [MAPPED | ((value >> 80n) & LOW_32)] };
  }
  return undefined;
}
