/**
 * Where `ferry` finds the broker: `--url` / `--api-key` / `--json` / `--cacert` first, then
 * `FERRY_URL` (default http://127.0.0.1:7800), `FERRY_API_KEY` and `FERRY_CACERT` from the
 * environment.
 */

import { usage } from "./failure.ts";

/** The broker a fresh checkout's `deno task start` listens on. */
export const DEFAULT_URL = "http://127.0.0.1:7800";

/** The settings every command runs with. */
export interface Settings {
  url: string;
  apiKey?: string;
  json: boolean;
  /** A CA file to trust besides the system's (`--cacert`, FERRY_CACERT), and where it came from. */
  caFile?: { path: string; source: string };
}

/** Reads one environment variable; undefined when unset or not permitted. */
export type Env = (name: string) => string | undefined;

/** The process environment, read only for the names `ferry` is allowed to see. */
export const processEnv: Env = (name) => {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // not granted by --allow-env: as good as unset
  }
};

/** Flags win over the environment; an unusable URL is a usage error. */
export function resolveSettings(
  flags: { url?: string; apiKey?: string; json?: boolean; cacert?: string },
  env: Env,
): Settings {
  const given = flags.url ?? (env("FERRY_URL") || undefined);
  const url = checkUrl(given ?? DEFAULT_URL, flags.url !== undefined ? "--url" : "FERRY_URL");
  const apiKey = flags.apiKey ?? (env("FERRY_API_KEY") || undefined);
  const ca = flags.cacert ?? (env("FERRY_CACERT") || undefined);
  const caFile = ca === undefined
    ? undefined
    : { path: ca, source: flags.cacert !== undefined ? "--cacert" : "FERRY_CACERT" };
  return { url, apiKey, json: flags.json === true, caFile };
}

/** An http(s) URL without a trailing slash, or a usage error naming where it came from. */
function checkUrl(value: string, source: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch { /* reported below */ }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw usage(
      `Invalid ${source} "${value}": expected an http:// or https:// URL like ${DEFAULT_URL}`,
    );
  }
  return url.href.replace(/\/+$/, "");
}
