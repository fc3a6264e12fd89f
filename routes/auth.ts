/**
 * The API-key check, a BeforeHook: every route but the `public` ones needs a key with the
 * route's scope. The key comes from `Authorization: Bearer`, `X-API-Key`, or on `/stream/*` and
 * `/ws` only (browsers cannot set headers there) the `api_key` query parameter.
 */

import { type ApiKey, type KeyRing, SCOPE_BITS } from "../lib/auth.ts";
import { BrokerError } from "../lib/errors.ts";
import { problem } from "./http.ts";
import type { BeforeHook, Caller, Ctx, Route } from "./router.ts";

const BEARER = /^bearer /i;

/**
 * True for the routes that also take `?api_key=`: SSE streams and the clients' WebSocket. Not
 * `/cluster/replicate`: a follower sends its key in a header, out of proxies' access logs.
 */
export function takesQueryKey(route: Route): boolean {
  return route.pattern.startsWith("/stream/") || route.pattern === "/ws";
}

/** The key a request presents: "" for an Authorization header of another scheme, else undefined. */
function presentedKey(req: Request, route: Route, ctx: Ctx): string | undefined {
  const auth = req.headers.get("authorization");
  if (auth !== null && BEARER.test(auth)) return auth.slice(7).trim();
  const header = req.headers.get("x-api-key");
  if (header !== null) return header.trim();
  const query = takesQueryKey(route) ? ctx.query.str("api_key") : undefined;
  return query ?? (auth === null ? undefined : "");
}

/**
 * The hook that answers 401 (no or unknown key) or 403 (key without the route's scope), and
 * names the request's caller: its key's name, and the publish limits it is held to.
 */
export function authHook(keys: KeyRing, limits?: PublishLimits): BeforeHook {
  return (req, route, ctx) => {
    if (route.scope === "public") return undefined;
    const given = presentedKey(req, route, ctx);
    const key = given ? keys.find(given) : undefined;
    const scopes = key?.scopes ?? 0;
    if (key) ctx.caller = caller(key, limits);
    if (scopes === 0) {
      const detail = given === undefined
        ? "Missing API key: send Authorization: Bearer <key> or X-API-Key: <key>"
        : "Invalid API key";
      return problem(new BrokerError("unauthorized", detail), ctx.requestId);
    }
    if ((scopes & SCOPE_BITS[route.scope]) === 0) {
      return problem(
        new BrokerError(
          "forbidden",
          `This API key lacks the "${route.scope}" scope that ${route.method} ${route.pattern} needs` +
            (route.scope === "metrics" ? ' (an "admin" key has it too)' : ""),
        ),
        ctx.requestId,
      );
    }
    return undefined;
  };
}

/**
 * What enforces per-key publish limits (lib/rate_limit.ts, by the key's digest), and counts
 * refusals by key name (names are unique: lib/auth.ts checkNames).
 */
export interface PublishLimits {
  /** 0 when admitted, else the ms to wait. */
  admit(key: ApiKey, messages: number, bytes: number): number;
  /** Takes without refusing: the rest of a publish admitted before its body was read. */
  take(key: ApiKey, messages: number, bytes: number): void;
  refused(name: string): void;
}

function caller(key: ApiKey, limits: PublishLimits | undefined): Caller {
  const { name, digest } = key;
  return {
    name,
    digest,
    admit(messages, bytes) {
      const waitMs = limits?.admit(key, messages, bytes) ?? 0;
      if (waitMs === 0) return;
      limits!.refused(name);
      throw new BrokerError(
        "rate_limited",
        `API key "${name}" publishes past its limit; retry in ${Math.ceil(waitMs / 1000)} s`,
        Math.ceil(waitMs / 1000),
      );
    },
    take(messages, bytes) {
      limits?.take(key, messages, bytes);
    },
  };
}
