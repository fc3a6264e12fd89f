/**
 * @module Which addresses webhooks may reach (docs/security.md "Webhook targets"). Unspecified
 * addresses (`0.0.0.0/8`, `::`) are always refused: a connection to them reaches the broker's own
 * host. Then an address is refused when BROKER_WEBHOOK_DENY holds it; when a built-in denial
 * (loopback, link-local, site-local, cloud metadata) holds it, unless an entry of
 * BROKER_WEBHOOK_ALLOW inside that denial holds it too (`0.0.0.0/0` opens none of them); else,
 * when BROKER_WEBHOOK_ALLOW is set, unless it holds it. An IPv6 address that embeds an IPv4 one
 * (lib/push/address_range.ts) is judged as that IPv4 address. Private ranges are allowed unless
 * denied: self-hosted receivers live there. Pure: net/webhook_sender.ts resolves names and asks
 * before each POST.
 */

import {
  addressValue,
  type Cidr,
  embeddedV4,
  formatV4,
  holds,
  inside,
  parseCidr,
} from "./address_range.ts";

/** Refused whatever the settings say: "this host, any address" is the broker's own host. */
export const UNSPECIFIED = ["0.0.0.0/8", "::/128"];

/** Refused unless an entry of BROKER_WEBHOOK_ALLOW inside the range names the address. */
export const BUILT_IN_DENY: readonly { range: string; what: string }[] = [
  { range: "127.0.0.0/8", what: "loopback" },
  { range: "::1", what: "loopback" },
  // Including 169.254.169.254 (AWS, GCP, Azure metadata).
  { range: "169.254.0.0/16", what: "link-local or a metadata address" },
  { range: "fe80::/10", what: "link-local" },
  // Deprecated (RFC 3879) but still routed on some networks, with no public use.
  { range: "fec0::/10", what: "site-local" },
  { range: "fd00:ec2::254", what: "a metadata address" }, // AWS over IPv6
  { range: "100.100.100.200", what: "a metadata address" }, // Alibaba Cloud
];

/** Private and shared ranges: allowed unless denied, but internal (answers not kept). */
export const PRIVATE = [
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "fc00::/7",
];

/** The opt-in for receivers on the broker's own host, as refusals and the start-up line name it. */
export const LOOPBACK_ALLOW = "127.0.0.0/8,::1";

const unspecified = UNSPECIFIED.map((c) => parseCidr(c)!);
const builtIns = BUILT_IN_DENY.map((b) => ({ ...b, cidr: parseCidr(b.range)! }));
const internal = [
  ...unspecified,
  ...builtIns.map((b) => b.cidr),
  ...PRIVATE.map((c) => parseCidr(c)!),
];

/** The values `value` is judged as, each with the words that name it in a refusal. */
function judgedAs(address: string, value: bigint): { value: bigint; subject: string }[] {
  const embedded = embeddedV4(value);
  if (!embedded) return [{ value, subject: address }];
  return embedded.addresses.map((v) => ({
    value: v,
    subject: `${address} embeds ${formatV4(v)} (${embedded.kind}), which`,
  }));
}

/**
 * Whether `address` is internal: unspecified, loopback, private, link-local, site-local or a
 * metadata address (or an IPv6 address embedding one). The attempts log keeps no answer of it.
 */
export function isInternal(address: string): boolean {
  const value = addressValue(address);
  if (value === undefined) return true;
  return [value, ...embeddedV4(value)?.addresses ?? []].some((v) =>
    internal.some((c) => holds(c, v))
  );
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
    for (const { value: v, subject } of judgedAs(address, value)) {
      const why = this.#judge(v, subject);
      if (why) return why;
    }
    return undefined;
  }

  #judge(value: bigint, subject: string): string | undefined {
    const any = unspecified.find((c) => holds(c, value));
    if (any) {
      return `${subject} is unspecified (${any.text}): it reaches the broker's own host, ` +
        "and no setting allows it";
    }
    const denied = this.#deny.find((c) => holds(c, value));
    if (denied) return `${subject} is in BROKER_WEBHOOK_DENY (${denied.text})`;
    const builtIn = builtIns.find((b) => holds(b.cidr, value));
    if (builtIn) {
      const opened = this.#allow.some((c) => inside(c, builtIn.cidr) && holds(c, value));
      return opened
        ? undefined
        : `${subject} is ${builtIn.what}; BROKER_WEBHOOK_ALLOW must name it ` +
          `(e.g. ${builtIn.range}) to allow it`;
    }
    if (this.#allow.length && !this.#allow.some((c) => holds(c, value))) {
      return `${subject} is not in BROKER_WEBHOOK_ALLOW`;
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

  /** The policy in a few fields, for the start-up log line. */
  summary(): Record<string, unknown> {
    const opens = (b: Cidr) => this.#allow.some((c) => inside(b, c) && inside(c, b));
    return {
      refused: [
        ...UNSPECIFIED,
        ...builtIns.filter((b) => !opens(b.cidr)).map((b) => b.range),
        ...this.#deny.map((c) => c.text),
      ],
      allowed: this.#allow.length ? this.#allow.map((c) => c.text) : "any other address",
      loopback: this.refusal("127.0.0.1") === undefined
        ? "allowed by BROKER_WEBHOOK_ALLOW"
        : `refused; BROKER_WEBHOOK_ALLOW=${LOOPBACK_ALLOW},0.0.0.0/0,::/0 allows it and the internet`,
    };
  }
}
