/**
 * The audit log (docs/security.md "Audit log"): one `audit` line for every answer to an admin
 * action (a route row's `audit`), refused ones included: who (the key's name, or null while API
 * keys are off or the key was unknown), what (the action, the path, and what a body or query
 * named: a topic, a queue, a webhook's URL), the outcome (the status) and the request id; the
 * line's `time` says when. Keys never appear, nor a webhook's secret or a URL's credentials.
 */

import type { Logger } from "../lib/log.ts";
import type { AfterHook } from "./router.ts";

/**
 * A webhook URL as an audit line names it: scheme, host, port and path, without a user name,
 * password, query or fragment, which may hold a credential. Undefined when it is no http(s) URL.
 */
export function auditedUrl(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
  return `${u.origin}${u.pathname}`.slice(0, 300);
}

/** The hook that writes the audit line of every answer to an admin action. */
export function auditHook(log: Logger): AfterHook {
  return (req, route, res, _seconds, requestId, ctx) => {
    if (!route?.audit) return;
    const url = new URL(req.url);
    log.audit({
      action: route.audit,
      key: ctx?.caller?.name ?? null,
      method: req.method,
      // The path only (no query string, which could hold a key); what the query named follows.
      path: url.pathname,
      subject: ctx?.subject ?? url.searchParams.get("queue") ?? undefined,
      status: res.status,
      request_id: requestId,
    });
  };
}
