/**
 * Which redirects the client follows, and where the API key may go (docs/typescript-client.md,
 * "Redirects"). A cluster follower answers a write with a 307 to its leader; `fetch` would follow
 * it and keep `X-API-Key` for any host and even from https to http, so the client asks fetch not
 * to follow (`redirect: "manual"`) and follows by hand:
 *
 * - never from `https:` to plain `http:`, nor to another scheme, key or not;
 * - with a key, only to the broker's own host, to the hosts of the `clusterNodes` option, and to
 *   the leader and peers GET /api/cluster/status lists (asked on the first redirect elsewhere,
 *   then at most every ASK_EVERY_MS);
 * - anywhere else, with a key to carry, the call fails with a FerryError `redirect_refused`
 *   (status 307) naming the target.
 */

import type { ClusterStatus } from "../../protocol/wire.ts";
import { FerryError, FerryUsageError } from "./errors.ts";

/** Redirect hops one call follows at most (as fetch: 20 there, fewer is plenty here). */
export const MAX_REDIRECTS = 5;
/** How often a redirect to an unknown host may ask the broker for its nodes again. */
const ASK_EVERY_MS = 5_000;
/** Statuses that redirect; 301, 302 and 303 turn a POST into a GET without a body, as fetch does. */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** True for a status `fetch` would follow. */
export function isRedirect(status: number): boolean {
  return REDIRECTS.has(status);
}

/** `host:port` of a URL, the scheme's default port filled in, lower case. */
function hostKey(u: URL): string {
  return `${u.hostname.toLowerCase()}:${u.port || (u.protocol === "https:" ? "443" : "80")}`;
}

/** Reads GET /api/cluster/status with the key; undefined when it cannot (403 without `admin`). */
export type AskNodes = () => Promise<ClusterStatus | undefined>;

/** The hosts a redirect may carry the API key to. */
export class ClusterNodes {
  readonly #hosts = new Set<string>();
  #askedAt = -Infinity;

  /** Starts with the broker's URL and the `clusterNodes` option's; a bad node is a usage error. */
  constructor(base: string, named: readonly string[] = []) {
    this.#hosts.add(hostKey(new URL(base)));
    for (const raw of named) {
      const u = URL.canParse(raw) ? new URL(raw) : undefined;
      if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
        throw new FerryUsageError(
          `clusterNodes entry ${JSON.stringify(raw)}`,
          'a node is an absolute http(s) URL, like "https://node2.internal:7800"',
        );
      }
      this.#hosts.add(hostKey(u));
    }
  }

  /** Whether the key may go to `to`, asking the broker for its nodes when `to` is unknown. */
  async allows(to: URL, ask: AskNodes): Promise<boolean> {
    if (this.#hosts.has(hostKey(to))) return true;
    if (performance.now() - this.#askedAt < ASK_EVERY_MS) return false;
    this.#askedAt = performance.now();
    const status = await ask().catch(() => undefined);
    if (!status) return false;
    for (const raw of [status.leader, ...(status.peers ?? []).map((p) => p.address)]) {
      if (typeof raw === "string" && URL.canParse(raw)) this.#hosts.add(hostKey(new URL(raw)));
    }
    return this.#hosts.has(hostKey(to));
  }
}

/**
 * Decides one hop of `action` from `from` to `to`: resolves when it may be followed, throws the
 * `redirect_refused` FerryError when not. `withKey`: there is an API key to carry.
 */
export async function checkRedirect(
  action: string,
  from: URL,
  to: URL,
  withKey: boolean,
  nodes: ClusterNodes,
  ask: AskNodes,
): Promise<void> {
  const refuse = (why: string) =>
    new FerryError({
      status: 307,
      code: "redirect_refused",
      detail: `${from.host} redirected to ${to.origin}${to.pathname}, ${why}`,
      action,
    });
  if (to.protocol !== "http:" && to.protocol !== "https:") {
    throw refuse("which is not http(s): not followed");
  }
  if (from.protocol === "https:" && to.protocol === "http:") {
    throw refuse("from HTTPS to plain HTTP: not followed");
  }
  if (!withKey || await nodes.allows(to, ask)) return;
  throw refuse(
    "which is not one of the cluster's nodes: not followed, so the API key does not go there " +
      "(name the node in the clusterNodes option, or use a key with the admin scope, which lets " +
      "the client read the nodes from GET /api/cluster/status)",
  );
}
