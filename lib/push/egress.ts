/**
 * @module Which addresses webhooks may reach (docs/security.md "Webhook targets"): CIDR ranges
 * from BROKER_WEBHOOK_DENY and BROKER_WEBHOOK_ALLOW, and built-in denials of link-local and
 * cloud metadata addresses. An address is refused when BROKER_WEBHOOK_DENY holds it; else, when
 * BROKER_WEBHOOK_ALLOW is set, unless it holds it; else when a built-in denial holds it.
 * Loopback and private ranges are allowed unless denied: self-hosted receivers live there. Pure:
 * net/webhook_sender.ts resolves names and asks before each POST.
 */

/** A range: its first address and prefix length, IPv4 held as IPv4-mapped IPv6 (::ffff:0:0/96). */
interface Cidr {
  text: string;
  base: bigint;
  bits: number;
}

/** Refused unless BROKER_WEBHOOK_ALLOW names them: link-local, and metadata services. */
export const BUILT_IN_DENY = [
  "169.254.0.0/16", // link-local, including 169.254.169.254 (AWS, GCP, Azure metadata)
  "fe80::/10", // IPv6 link-local
  "fd00:ec2::254/128", // AWS metadata over IPv6
  "100.100.100.200/32", // Alibaba Cloud metadata
];

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function v4(text: string): bigint | undefined {
  const m = V4.exec(text);
  if (!m) return undefined;
  let n = 0n;
  for (const part of m.slice(1)) {
    const b = Number(part);
    if (b > 255 || (part.length > 1 && part.startsWith("0"))) return undefined;
    n = (n << 8n) | BigInt(b);
  }
  return 0xffff00000000n | n;
}

function v6(text: string): bigint | undefined {
  const zone = text.indexOf("%");
  let s = zone < 0 ? text : text.slice(0, zone);
  let tail: bigint | undefined; // an embedded IPv4 in the last 32 bits
  const lastColon = s.lastIndexOf(":");
  if (s.slice(lastColon + 1).includes(".")) {
    const four = v4(s.slice(lastColon + 1));
    if (four === undefined) return undefined;
    tail = four & 0xffffffffn;
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
  return tail === undefined ? n : (n & ~0xffffffffn) | tail;
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

function parseCidr(entry: string): Cidr | undefined {
  const slash = entry.indexOf("/");
  const addr = slash < 0 ? entry : entry.slice(0, slash);
  const value = addressValue(addr);
  if (value === undefined) return undefined;
  const isV4 = !addr.includes(":");
  const max = isV4 ? 32 : 128;
  const prefixText = slash < 0 ? undefined : entry.slice(slash + 1);
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  const bits = isV4 ? 96 + prefix : prefix;
  const mask = bits === 0 ? 0n : ((1n << BigInt(bits)) - 1n) << BigInt(128 - bits);
  return { text: entry, base: value & mask, bits };
}

function holds(c: Cidr, value: bigint): boolean {
  if (c.bits === 0) return true;
  const mask = ((1n << BigInt(c.bits)) - 1n) << BigInt(128 - c.bits);
  return (value & mask) === c.base;
}

/** A comma-separated list of ranges (`10.0.0.0/8`, `fd00::/8`, or single addresses). */
export function parseCidrList(list: string, setting: string): Cidr[] {
  const out: Cidr[] = [];
  for (const raw of list.split(",")) {
    const entry = raw.trim();
    if (!entry) continue;
    const c = parseCidr(entry);
    if (!c) {
      throw new Error(
        `${setting}: "${
          entry.slice(0, 64)
        }" is not an address range (10.0.0.0/8, fd00::/8, 192.0.2.7)`,
      );
    }
    out.push(c);
  }
  return out;
}

/** The webhook egress policy of one broker. */
export class EgressPolicy {
  readonly #deny: Cidr[];
  readonly #allow: Cidr[];
  readonly #builtIn = BUILT_IN_DENY.map((c) => parseCidr(c)!);

  /** From BROKER_WEBHOOK_DENY and BROKER_WEBHOOK_ALLOW; throws naming the setting and entry. */
  constructor(deny = "", allow = "") {
    this.#deny = parseCidrList(deny, "BROKER_WEBHOOK_DENY");
    this.#allow = parseCidrList(allow, "BROKER_WEBHOOK_ALLOW");
  }

  /** Why `address` may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined {
    const value = addressValue(address);
    if (value === undefined) return `"${address}" is not an IP address`;
    const denied = this.#deny.find((c) => holds(c, value));
    if (denied) return `${address} is in BROKER_WEBHOOK_DENY (${denied.text})`;
    if (this.#allow.length) {
      return this.#allow.some((c) => holds(c, value))
        ? undefined
        : `${address} is not in BROKER_WEBHOOK_ALLOW`;
    }
    const builtIn = this.#builtIn.find((c) => holds(c, value));
    if (builtIn) {
      return `${address} is link-local or a metadata address (${builtIn.text}); ` +
        "BROKER_WEBHOOK_ALLOW must name it to allow it";
    }
    return undefined;
  }

  /** Why a name that resolves to `addresses` may not be reached (the first refused), or undefined. */
  refusalOf(addresses: readonly string[]): string | undefined {
    for (const a of addresses) {
      const why = this.refusal(a);
      if (why) return why;
    }
    return undefined;
  }
}
