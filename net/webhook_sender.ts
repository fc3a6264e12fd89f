/**
 * @module How the broker POSTs a webhook: over fetch, no redirects followed, the first 1 KiB of
 * the answer kept for the attempts log, a timeout or a network error reported as text.
 */

import type { WebhookSend } from "../lib/push/webhook_pusher.ts";

/** How long a webhook endpoint may take to answer (docs/api/webhooks.md: any 2xx within 15 s). */
export const WEBHOOK_TIMEOUT_MS = 15_000;
/** Characters of an endpoint's answer kept for the attempts log. */
const ANSWER_CHARS = 1024;

/**
 * A webhook sender over fetch: no redirects followed (a 3xx is a failure, as at Svix), the first
 * 1 KiB of the answer read and the rest dropped, a timeout or a network error reported.
 */
export function fetchSender(timeoutMs = WEBHOOK_TIMEOUT_MS): WebhookSend {
  return async (url, { headers, body }) => {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers,
        body: body as Uint8Array<ArrayBuffer>,
        redirect: "manual",
        signal: AbortSignal.timeout(timeoutMs),
      });
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
  };
}
