/**
 * Which sites may drive the broker (docs/security.md "Browsers"). A request must name the broker
 * by a host it answers to: loopback names, BROKER_ALLOWED_HOSTS and the advertised URL's host, and
 * on a bind beyond loopback any IP address too (a rebinding page names its own host, never an
 * address), so a DNS-rebinding page reads nothing. The check holds on a loopback bind, and on any
 * bind while API keys are off or BROKER_ALLOWED_HOSTS is set. A
 * browser request that changes state must come from the broker's own origin, one in
 * BROKER_ALLOWED_ORIGINS or the advertised URL's: a cross-site form, `fetch`, `<img>` or
 * WebSocket is refused. Clients that send no `Origin` (curl, the TS and Go clients, the CLI)
 * pass, whether API keys are on or off.
 */

import type { Config } from "../lib/config.ts";
import { BrokerError } from "../lib/errors.ts";
import type { Route } from "./router.ts";

/** A loopback address as a Host names it; `localhost` is checked apart. */
const LOOPBACK_HOST = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$|^\[::1\]$/;
/** An IP address as a Host names it: no page a DNS name serves can send one of these. */
const ADDRESS_HOST = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$|^\[[0-9a-f:.]+\]$/;
/** Authorities already let through, so the usual few cost one lookup; bounded against floods. */
const KNOWN_AUTHORITIES_MAX = 64;

/** Whether a listen address (BROKER_HOST) is a loopback one. */
export function isLoopbackBind(host: string): boolean {
  return host === "localhost" || host === "::1" || LOOPBACK_HOST.test(host);
}

/** The host of an authority (`[::1]:7800` → `[::1]`), lower-cased, without a trailing dot. */
function hostOf(authority: string): string {
  const a = authority.toLowerCase();
  let host: string;
  if (a.startsWith("[")) {
    const end = a.indexOf("]");
    host = end < 0 ? a : a.slice(0, end + 1);
  } else {
    const colon = a.indexOf(":");
    host = colon < 0 ? a : a.slice(0, colon);
  }
  return host.endsWith(".") ? host.slice(0, -1) : host;
}

/** The request checks of routes/app.ts for one broker's settings. */
export class SitePolicy {
  /** Host names besides loopback ones; undefined: any host is answered. */
  readonly #hosts: Set<string> | undefined;
  readonly #origins: Set<string>;
  /** Bound beyond loopback: a Host that is an IP address is this machine's, not a rebound name. */
  readonly #addresses: boolean;
  readonly #known = new Set<string>();

  constructor(
    opts: { hosts?: readonly string[]; origins?: readonly string[]; addresses?: boolean },
  ) {
    this.#hosts = opts.hosts ? new Set(opts.hosts) : undefined;
    this.#origins = new Set(opts.origins ?? []);
    this.#addresses = opts.addresses ?? false;
  }

  /**
   * Refuses (403 `forbidden`) a request whose URL names a host the broker does not answer to;
   * `origin` is the URL's `scheme://authority`. A host that makes no URL is 400.
   */
  checkHost(origin: string): void {
    const hosts = this.#hosts;
    if (!hosts) return;
    const authority = origin.slice(origin.indexOf("//") + 2);
    if (this.#known.has(authority)) return;
    const host = hostOf(authority);
    if (
      host === "localhost" || LOOPBACK_HOST.test(host) || hosts.has(host) ||
      (this.#addresses && ADDRESS_HOST.test(host))
    ) {
      if (this.#known.size < KNOWN_AUTHORITIES_MAX && URL.canParse(origin)) {
        this.#known.add(authority);
      }
      return;
    }
    if (!URL.canParse(origin)) {
      throw new BrokerError("bad_request", "Cannot read the request URL: check the Host header");
    }
    throw new BrokerError(
      "forbidden",
      `Cannot answer a request for host "${shown(authority)}": ` +
        (this.#addresses
          ? "the broker answers its IP addresses, localhost and the names in BROKER_ALLOWED_HOSTS; " +
            "list this name there (or turn API keys on)"
          : "the broker listens on loopback and answers localhost, 127.0.0.1 and [::1]; list " +
            "other names in BROKER_ALLOWED_HOSTS"),
    );
  }

  /**
   * Refuses (403 `forbidden`) a browser's request that changes state from another site: an
   * `Origin` that is neither `origin` (the broker's own, from the request's Host) nor allowed,
   * or no `Origin` with `Sec-Fetch-Site: cross-site` or `same-site`.
   */
  checkSite(req: Request, route: Route, origin: string, path: string): void {
    if (!changesState(req, route)) return;
    const from = req.headers.get("origin");
    if (from === null) {
      const site = req.headers.get("sec-fetch-site");
      if (site !== "cross-site" && site !== "same-site") return;
      throw new BrokerError(
        "forbidden",
        `Cannot ${req.method} ${shown(path)} from a ${site} page without an Origin: a browser ` +
          `may change state only from ${origin} or an origin in BROKER_ALLOWED_ORIGINS`,
      );
    }
    if (from === origin || this.#origins.has(from) || sameOrigin(from, origin)) return;
    throw new BrokerError(
      "forbidden",
      `Cannot ${req.method} ${shown(path)} from origin "${shown(from)}": a browser may change ` +
        `state only from ${origin} or an origin in BROKER_ALLOWED_ORIGINS`,
    );
  }
}

/**
 * Whether a request can change state: any method but GET and HEAD, a GET that does (`mutates`:
 * consume leases or acks), and a WebSocket upgrade (`/ws` consumes and publishes, and no browser
 * keeps another origin from reading a socket's frames, as it does for answers).
 */
function changesState(req: Request, route: Route): boolean {
  const m = req.method;
  if (m !== "GET" && m !== "HEAD") return true;
  return route.mutates === true || req.headers.has("upgrade");
}

/** Two origins that differ only in spelling (`HTTP://LocalHost:80` and `http://localhost`). */
function sameOrigin(a: string, b: string): boolean {
  return URL.canParse(a) && URL.canParse(b) && new URL(a).origin === new URL(b).origin;
}

/** A value from the request for an error message, bounded. */
function shown(v: string): string {
  return v.length > 200 ? `${v.slice(0, 200)}…` : v;
}

/** The advertised URL's origin and host (BROKER_ADVERTISE_URL), which clients use by design. */
function advertised(url: string): { origin: string; host: string } | undefined {
  if (!url || !URL.canParse(url)) return undefined;
  const u = new URL(url);
  return { origin: u.origin, host: hostOf(u.host) };
}

/**
 * The policy of a configuration: its bind address, whether API keys are on, and
 * BROKER_ALLOWED_HOSTS / _ORIGINS. Beyond loopback with keys on, any Host is answered unless
 * BROKER_ALLOWED_HOSTS is set: a rebound page cannot send the key.
 */
export function sitePolicy(
  config: Pick<
    Config,
    "host" | "allowedHosts" | "allowedOrigins" | "advertiseUrl" | "apiKeys" | "apiKeysFile"
  >,
): SitePolicy {
  const adv = advertised(config.advertiseUrl);
  const loopback = isLoopbackBind(config.host);
  const keysOff = config.apiKeys === "" && config.apiKeysFile === "";
  const checked = !config.allowedHosts.includes("*") &&
    (loopback || keysOff || config.allowedHosts.length > 0);
  return new SitePolicy({
    hosts: checked ? [...config.allowedHosts, ...adv ? [adv.host] : []] : undefined,
    origins: [...config.allowedOrigins, ...adv ? [adv.origin] : []],
    addresses: !loopback,
  });
}
