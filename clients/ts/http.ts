/**
 * One request to the broker, with the client's rules around it: the API key, a request id, a
 * deadline per attempt, problem answers turned into FerryErrors, and retries. Every call is
 * retried on 429 and 503 (the broker refuses those before doing anything), waiting `Retry-After`;
 * only calls marked idempotent are retried after a lost connection, since the broker may have
 * acted on the first. A timeout is never retried: it is the caller's deadline, nor is a header
 * that cannot be sent (a FerryUsageError, thrown before any attempt). Redirects are followed by
 * hand, the API key only where redirect.ts allows.
 */

import { retryDelay, sleep } from "./backoff.ts";
import {
  checkHeaderName,
  checkHeaderValue,
  FerryBadResponseError,
  FerryClosedError,
  FerryConnectionError,
  FerryError,
  FerryTimeoutError,
  isBusy,
  problemError,
} from "./errors.ts";
import { checkRedirect, ClusterNodes, isRedirect, MAX_REDIRECTS } from "./redirect.ts";
import type { ErrorCode } from "../../protocol/error_codes.ts";
import type { ClusterStatus } from "../../protocol/wire.ts";

/** A retry about to happen, as `onRetry` hears it. */
export interface RetryInfo {
  /** What is being retried, e.g. `GET /api/stats`. */
  action: string;
  /** 1 for the first retry. */
  attempt: number;
  /** How long the client waits before it. */
  delayMs: number;
  /** What the previous attempt got. */
  error: FerryError;
}

/** Settings of the transport, with the defaults already applied. */
export interface HttpSettings {
  /** Base URL without a trailing slash. */
  url: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retries: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  fetch: typeof fetch;
  onRetry: ((info: RetryInfo) => void) | undefined;
  /** Other nodes of the cluster a redirect may carry the API key to (their base URLs). */
  clusterNodes?: readonly string[];
}

/** Marks the calls of a consumer loop's shutdown, which `ferry.close()` lets through. */
export const SETTLING: unique symbol = Symbol("ferry.settling");

/** The option SETTLING names, on a call's options. */
export interface SettlingOption {
  [SETTLING]?: boolean;
}

/** Query values; undefined ones are left out. */
export type QueryValues = Record<string, string | number | boolean | undefined>;

/** One call to make. */
export interface Call {
  method: "GET" | "POST" | "DELETE";
  /** The path, its segments already encoded. */
  path: string;
  query?: QueryValues;
  /** A raw body (sent as-is, so a 307 can send it again). */
  body?: string | Uint8Array;
  /** A JSON body; sets Content-Type. */
  json?: unknown;
  headers?: Record<string, string>;
  /** Safe to send again after a lost connection. */
  idempotent: boolean;
  signal?: AbortSignal;
  /** This call's deadline per attempt (default: the client's `timeoutMs`). */
  timeoutMs?: number;
  /** A problem with this code is an empty answer (consume's `queue_empty`), not an error. */
  empty?: ErrorCode;
  /**
   * A problem with this code after a lost attempt means that attempt did the work (an ack that
   * went through before its answer was lost): the call resolves empty.
   */
  doneOnRetry?: ErrorCode;
  /** Statuses whose body is the answer, not a problem (the 503 of /healthz). */
  answers?: number[];
  /** False: one attempt only. */
  retry?: boolean;
  /** The answer's body is text (the metrics page), not JSON. */
  text?: boolean;
  /** Part of a consumer loop's shutdown: still sent while `ferry.close()` stops the loop. */
  settling?: boolean;
}

/** A finished exchange: the status and the parsed JSON body (undefined when empty). */
export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** Sends calls to one broker. */
export class Http {
  readonly #nodes: ClusterNodes;
  /** Set by `ferry.close()`: calls (but a loop's shutdown work) reject with FerryClosedError. */
  closed = false;

  /** Throws a FerryUsageError for an `apiKey` no header can carry: a usage error, not a failure. */
  constructor(readonly settings: HttpSettings) {
    if (settings.apiKey !== undefined) checkHeaderValue("apiKey", settings.apiKey);
    this.#nodes = new ClusterNodes(settings.url, settings.clusterNodes);
  }

  /** The full URL of a path and query. */
  urlOf(path: string, query?: QueryValues): string {
    let url = this.settings.url + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) url += `?${s}`;
    }
    return url;
  }

  /** Sends `call`, retrying as the module note says; resolves with the answer or throws. */
  async request(call: Call): Promise<Answer> {
    const s = this.settings;
    const action = `${call.method} ${call.path}`;
    if (this.closed && !call.settling) throw new FerryClosedError(action);
    const requestId = crypto.randomUUID();
    let lost = false; // an earlier attempt lost its connection: it may have done the work
    for (let attempt = 0;; attempt++) {
      let error: FerryError;
      try {
        const res = await this.#once(call, action, requestId);
        if ((res.status >= 200 && res.status < 300) || call.answers?.includes(res.status)) {
          const body = call.text ? res.text : parseBody(res, action);
          return { status: res.status, headers: res.headers, body };
        }
        error = problemError(res.status, res.headers, res.text, action, requestId);
        const empty = error.code === call.empty || (lost && error.code === call.doneOnRetry);
        if (empty) return { status: res.status, headers: res.headers, body: undefined };
      } catch (e) {
        if (!(e instanceof FerryConnectionError)) throw e; // a timeout or the caller's abort
        error = e;
        lost = true;
      }
      const again = call.retry !== false && attempt < s.retries &&
        (error instanceof FerryConnectionError
          ? call.idempotent
          : isBusy(error) && (error.code !== "bad_response" || call.idempotent));
      if (!again) throw error;
      const delayMs = error.retryAfter !== undefined
        ? Math.min(error.retryAfter * 1000, s.maxRetryDelayMs)
        : retryDelay(attempt, s.retryDelayMs, s.maxRetryDelayMs);
      s.onRetry?.({ action, attempt: attempt + 1, delayMs, error });
      await sleep(delayMs, call.signal);
    }
  }

  /**
   * Opens a long-lived response (an event stream): the deadline covers only the wait for its
   * head, and the body is left for the caller, whose `signal` ends it.
   */
  async open(
    path: string,
    query: QueryValues,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<Response> {
    const action = `GET ${path}`;
    if (this.closed) throw new FerryClosedError(action);
    const requestId = crypto.randomUUID();
    return await this.#fetch(this.urlOf(path, query), { headers }, action, requestId, {
      signal,
      timeoutMs: this.settings.timeoutMs,
      read: (res) => Promise.resolve(res),
      linked: true,
    });
  }

  async #once(
    call: Call,
    action: string,
    requestId: string,
  ): Promise<{ status: number; headers: Headers; text: string }> {
    const headers: Record<string, string> = { ...call.headers };
    let body = call.body;
    if (call.json !== undefined) {
      body = JSON.stringify(call.json);
      headers["content-type"] = "application/json";
    }
    return await this.#fetch(
      this.urlOf(call.path, call.query),
      { method: call.method, headers, body: body as BodyInit | undefined },
      action,
      requestId,
      {
        signal: call.signal,
        timeoutMs: call.timeoutMs ?? this.settings.timeoutMs,
        read: async (res) => ({ status: res.status, headers: res.headers, text: await res.text() }),
      },
    );
  }

  /**
   * fetch with the key, the request id and a deadline over `read` (the head and whatever `read`
   * consumes); a failure becomes a FerryTimeoutError or FerryConnectionError, and the caller's
   * abort its signal's reason. `linked`: the caller's signal goes on ending the body after `read`.
   */
  async #fetch<T>(
    url: string,
    init: RequestInit & { headers: Record<string, string> },
    action: string,
    requestId: string,
    o: {
      signal?: AbortSignal;
      timeoutMs: number;
      read: (res: Response) => Promise<T>;
      linked?: boolean;
    },
  ): Promise<T> {
    o.signal?.throwIfAborted();
    // A header fetch cannot send would fail as if the broker were unreachable, and be retried.
    for (const [name, value] of Object.entries(init.headers)) {
      checkHeaderName(name);
      checkHeaderValue(`header "${name}"`, value);
    }
    // Redirects are followed by #follow, which decides where the key may go.
    if (this.settings.apiKey !== undefined) init.headers["x-api-key"] = this.settings.apiKey;
    init.headers["x-request-id"] = requestId;
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, o.timeoutMs);
    const onAbort = () => ac.abort(o.signal!.reason);
    o.signal?.addEventListener("abort", onAbort, { once: true });
    let linked = false;
    try {
      const res = await this.#follow(url, { ...init, signal: ac.signal }, action);
      const out = await o.read(res);
      linked = o.linked === true;
      return out;
    } catch (e) {
      if (e instanceof FerryError) throw e; // a refused redirect
      if (timedOut) {
        throw new FerryTimeoutError({
          detail: `No answer within ${o.timeoutMs} ms`,
          requestId,
          action,
          cause: e,
        });
      }
      if (o.signal?.aborted) throw o.signal.reason;
      throw new FerryConnectionError({
        detail: `Cannot reach ${this.settings.url}: ${describe(e)}`,
        requestId,
        action,
        cause: e,
      });
    } finally {
      clearTimeout(timer);
      if (!linked) o.signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * fetch that follows redirects by hand (redirect.ts): the body again for a 307 or 308, a GET
   * without one for a 303 (and a 301 or 302 of a POST), as fetch does.
   */
  async #follow(
    first: string,
    init: RequestInit & { headers: Record<string, string> },
    action: string,
  ): Promise<Response> {
    let url = new URL(first);
    let req: RequestInit & { headers: Record<string, string> } = { ...init, redirect: "manual" };
    for (let hop = 0;; hop++) {
      const res = await this.settings.fetch(url.href, req);
      if (res.type === "opaqueredirect") {
        // A browser hides where a redirect goes, so nothing can be checked: with a key to carry
        // it is refused; without one, fetch may follow it (a browser never goes https → http).
        if (this.settings.apiKey === undefined) {
          return await this.settings.fetch(url.href, { ...req, redirect: "follow" });
        }
        throw new FerryError({
          status: 307,
          code: "redirect_refused",
          detail: `${url.host} answered with a redirect, whose target a browser does not show, ` +
            `so the API key is not sent on: point the client at the cluster's leader`,
          action,
        });
      }
      const location = res.headers.get("location");
      if (!isRedirect(res.status) || location === null) return res;
      await res.body?.cancel();
      const to = new URL(location, url);
      if (hop === MAX_REDIRECTS) {
        throw new FerryError({
          status: res.status,
          code: "redirect_refused",
          detail: `More than ${MAX_REDIRECTS} redirects; the last to ${to.origin}${to.pathname}`,
          action,
        });
      }
      await checkRedirect(
        action,
        url,
        to,
        this.settings.apiKey !== undefined,
        this.#nodes,
        () => this.#askNodes(init.signal ?? undefined),
      );
      if (res.status === 303 || (res.status <= 302 && req.method === "POST")) {
        const { "content-type": _, ...headers } = req.headers;
        req = { ...req, method: "GET", body: undefined, headers };
      }
      url = to;
    }
  }

  /** The broker's GET /api/cluster/status, for the nodes a redirect may go to. */
  async #askNodes(signal: AbortSignal | undefined): Promise<ClusterStatus | undefined> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.settings.apiKey !== undefined) headers["x-api-key"] = this.settings.apiKey;
    const res = await this.settings.fetch(this.urlOf("/api/cluster/status"), {
      headers,
      signal,
      redirect: "manual",
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      return undefined;
    }
    return await res.json() as ClusterStatus;
  }
}

/** The JSON of a 2xx answer; undefined when empty (204). */
function parseBody(res: { status: number; headers: Headers; text: string }, action: string) {
  if (res.text === "") return undefined;
  try {
    return JSON.parse(res.text);
  } catch (e) {
    throw new FerryBadResponseError({
      status: res.status,
      detail: `Expected JSON, got ${JSON.stringify(res.text.slice(0, 200))}`,
      requestId: res.headers.get("x-request-id") ?? undefined,
      action,
      cause: e,
    });
  }
}

/** An error's message with its cause's (Node puts ECONNREFUSED in `cause`). */
function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause as { message?: string; code?: string } | undefined;
  const more = cause?.message ?? cause?.code;
  return more && !e.message.includes(more) ? `${e.message}: ${more}` : e.message;
}
