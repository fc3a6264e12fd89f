/**
 * @module How the broker POSTs a webhook: over fetch, no redirects followed, the first 1 KiB of
 * the answer kept for the attempts log (none from an internal target: loopback, private,
 * link-local), a timeout or a network error reported as text. Before each POST the target's host
 * is resolved and every address it resolves to is checked against the egress policy
 * (lib/push/egress.ts). An `http:` POST then connects to an address it checked, so a DNS answer
 * that changes between the check and the connection cannot lead elsewhere; an `https:` one is
 * sent only to a peer with a certificate for the URL's host.
 */

import { isAddress } from "../lib/push/address_range.ts";
import { EgressPolicy, isInternal } from "../lib/push/egress.ts";
import type { SendResult, WebhookSend, WebhookVet } from "../lib/push/webhook_pusher.ts";

/** How long a webhook endpoint may take to answer (docs/api/webhooks.md: any 2xx within 15 s). */
export const WEBHOOK_TIMEOUT_MS = 15_000;
/** Characters of an endpoint's answer kept for the attempts log. */
const ANSWER_CHARS = 1024;
/** How long a URL's check (its host's addresses, and the policy's word) is used. */
const RESOLVED_FOR_MS = 5_000;
/** Connections pinned to a checked address kept open for reuse, at most. */
const PINNED_CLIENTS = 256;

/** How a URL's POSTs go for a while: refused, or sent, pinned to a checked address or not. */
interface Route {
  until: number;
  refused?: string;
  pin?: { address: string; port: number };
  /** Whether an address it may connect to is internal: its answers are not kept. */
  internal?: boolean;
}

/** A host's addresses: what the system resolver answers for A and AAAA. */
export type Resolve = (host: string) => Promise<string[]>;

/** How long resolving a webhook's host may take. */
const RESOLVE_TIMEOUT_MS = 2_000;

async function systemResolve(host: string): Promise<string[]> {
  const signal = AbortSignal.timeout(RESOLVE_TIMEOUT_MS);
  const answers = await Promise.allSettled([
    Deno.resolveDns(host, "A", { signal }),
    Deno.resolveDns(host, "AAAA", { signal }),
  ]);
  const out = answers.flatMap((a) => a.status === "fulfilled" ? a.value : []);
  if (!out.length) throw new Error(`cannot resolve ${host}`);
  return out;
}

/** A webhook sender, and the check of a URL at registration, under one egress policy. */
export interface Sender {
  send: WebhookSend;
  vet: WebhookVet;
}

/**
 * Sends over fetch with no redirects followed (a 3xx is a failure, as at Svix), reading the
 * first 1 KiB of the answer and dropping the rest (all of it from an internal address), and
 * refuses targets `policy` refuses. `resolve` gives a host's addresses (default: DNS).
 */
export function fetchSender(
  opts: { timeoutMs?: number; policy?: EgressPolicy; resolve?: Resolve } = {},
): Sender {
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const policy = opts.policy ?? new EgressPolicy();
  const resolve = opts.resolve ?? systemResolve;
  /** What each URL's POSTs do until `until`: refused, or sent (pinned to an address or not). */
  const routes = new Map<string, Route>();
  const pinned = new Map<string, Deno.HttpClient>();

  /** A client whose connections all go to `address`:`port`, whatever the URL's host. */
  function pinnedTo(address: string, port: number): Deno.HttpClient {
    const key = `${address}|${port}`;
    let client = pinned.get(key);
    if (client) {
      pinned.delete(key); // most recently used last
    } else {
      if (pinned.size >= PINNED_CLIENTS) {
        const [oldest, c] = pinned.entries().next().value!;
        pinned.delete(oldest);
        c.close();
      }
      // The proxy is a URI authority: an IPv6 address goes in brackets.
      const hostname = address.includes(":") ? `[${address}]` : address;
      client = Deno.createHttpClient({ proxy: { transport: "tcp", hostname, port } });
    }
    pinned.set(key, client);
    return client;
  }

  /** Resolves and checks `url`'s host; throws when it cannot be resolved. */
  async function routeOf(url: string): Promise<Route> {
    const target = new URL(url);
    const host = target.hostname;
    const addresses = isAddress(host) ? [host] : await resolve(host);
    const refused = policy.refusalOf(addresses);
    const until = performance.now() + RESOLVED_FOR_MS;
    if (refused) return { until, refused };
    // Plain HTTP goes to the address just checked. HTTPS needs no pin: its request is sent only
    // to a peer holding a certificate for the URL's host, which a rebound address will not; it
    // may connect to any address the name has, so its answers are kept only if none is internal.
    if (isAddress(host) || target.protocol !== "http:") {
      return { until, internal: addresses.some(isInternal) };
    }
    const address = addresses[0]!;
    return {
      until,
      pin: { address, port: Number(target.port || 80) },
      internal: isInternal(address),
    };
  }

  const send: WebhookSend = async (url, { headers, body }) => {
    let route = routes.get(url);
    if (!route || route.until <= performance.now()) {
      try {
        route = await routeOf(url);
      } catch (e) {
        return { error: (e as Error).message.slice(0, 200) };
      }
      if (routes.size >= PINNED_CLIENTS) routes.clear();
      routes.set(url, route);
    }
    if (route.refused) return { refused: route.refused };
    const client = route.pin && pinnedTo(route.pin.address, route.pin.port);
    return await post(url, headers, body, timeoutMs, client, !route.internal);
  };

  const vet: WebhookVet = async (url) => {
    try {
      return (await routeOf(url)).refused;
    } catch {
      // A bad URL: the registration's own check names what is wrong with it. Not resolvable
      // yet: each POST checks again.
      return undefined;
    }
  };

  return { send, vet };
}

async function post(
  url: string,
  headers: Record<string, string>,
  body: Uint8Array,
  timeoutMs: number,
  client: Deno.HttpClient | undefined,
  keepAnswer: boolean,
): Promise<SendResult> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers,
      body: body as Uint8Array<ArrayBuffer>,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
      client,
    });
    if (!keepAnswer) {
      await res.body?.cancel().catch(() => {});
      return { status: res.status, answer: null };
    }
    let answer = "";
    if (res.body) {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      while (answer.length < ANSWER_CHARS) {
        const { value, done } = await reader.read();
        if (done) break;
        answer += value;
      }
      await reader.cancel().catch(() => {});
    }
    return { status: res.status, answer: answer.slice(0, ANSWER_CHARS) };
  } catch (e) {
    const err = e as Error;
    return {
      error: err.name === "TimeoutError"
        ? `no answer within ${timeoutMs / 1000} s`
        : err.message.slice(0, 200),
    };
  }
}
