/**
 * The audit log (docs/security.md "Audit log"): one `audit` line for every answer to an admin
 * action (a route row's `audit`), refused ones included: who (the key's name, or null while API
 * keys are off or the key was unknown), what (the action, the path, and what a body or query
 * named), the outcome (the status) and the request id; the line's `time` says when. Keys never
 * appear.
 */

import type { Logger } from "../lib/log.ts";
import type { AfterHook } from "./router.ts";

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
