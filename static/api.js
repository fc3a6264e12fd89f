// @ts-check
/**
 * Calls to the broker's JSON interface: the API key of this tab (sessionStorage) as a Bearer
 * token, and every failure as an ApiError that carries the problem body's `detail`.
 */

const KEY_ITEM = "ferry.apiKey";

/** The API key kept for this tab, or "". */
export function apiKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM) ?? "";
  } catch {
    return "";
  }
}

/** Keeps `key` for this tab; "" forgets it. @param {string} key */
export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
}

/** A refused or failed call: the HTTP status (0 when the broker was not reached) and the problem. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} detail
   * @param {string | null} [requestId]
   */
  constructor(status, code, detail, requestId = null) {
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.requestId = requestId;
  }
}

/** @type {Set<(err: ApiError) => void>} */
const authListeners = new Set();

/** Calls `fn` on every 401 (a key is missing or wrong). @param {(err: ApiError) => void} fn */
export function onUnauthorized(fn) {
  authListeners.add(fn);
}

/**
 * @typedef {object} CallOptions
 * @property {unknown} [json] a JSON body
 * @property {BodyInit} [body] a raw body
 * @property {Record<string, string>} [headers]
 * @property {Record<string, string | number | boolean | undefined>} [query]
 * @property {AbortSignal} [signal]
 */

/**
 * A URL of the broker with query parameters; empty and undefined values are left out.
 * @param {string} path
 * @param {CallOptions["query"]} [query]
 */
export function urlOf(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== "") params.set(k, String(v));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** The headers every call sends: the key, when one is set. @param {HeadersInit} [extra] */
export function authHeaders(extra) {
  const headers = new Headers(extra);
  const key = apiKey();
  if (key) headers.set("authorization", `Bearer ${key}`);
  return headers;
}

/**
 * Turns a non-2xx response into an ApiError with its problem `detail` (or the status line).
 * @param {Response} res
 * @returns {Promise<ApiError>}
 */
export async function problemOf(res) {
  /** @type {any} */
  let body;
  try {
    body = await res.json();
  } catch { /* not a problem body */ }
  const detail = typeof body?.detail === "string"
    ? body.detail
    : `The broker answered ${res.status} ${res.statusText}`.trim();
  const err = new ApiError(
    res.status,
    typeof body?.code === "string" ? body.code : `http_${res.status}`,
    detail,
    body?.request_id ?? res.headers.get("x-request-id"),
  );
  if (res.status === 401) { for (const fn of authListeners) fn(err); }
  return err;
}

/**
 * One call to the broker; resolves with the parsed JSON answer (undefined for an empty one).
 * @param {string} method
 * @param {string} path
 * @param {CallOptions} [opts]
 * @returns {Promise<any>}
 */
export async function api(method, path, opts = {}) {
  const headers = authHeaders(opts.headers);
  let body = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers.set("content-type", "application/json");
  }
  /** @type {Response} */
  let res;
  try {
    res = await fetch(urlOf(path, opts.query), { method, headers, body, signal: opts.signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(
      0,
      "network",
      `Cannot reach the broker: ${(/** @type {Error} */ (e)).message}`,
    );
  }
  if (!res.ok) throw await problemOf(res);
  const text = await res.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(res.status, "bad_answer", `The broker's answer to ${path} is not JSON`);
  }
}

/** How an error reads to a person: the detail, and for a 401/403 what to do about it. @param {unknown} err */
export function describeError(err) {
  if (err instanceof ApiError) {
    const ref = err.requestId ? ` (${err.code}, request ${err.requestId})` : "";
    if (err.status === 401) return `${err.detail}${ref}. Enter an API key to continue.`;
    if (err.status === 403) return `${err.detail}${ref}. Use a key with that scope.`;
    return `${err.detail}${err.status ? ref : ""}`;
  }
  return err instanceof Error ? err.message : String(err);
}
