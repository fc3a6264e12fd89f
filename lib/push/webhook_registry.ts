/**
 * @module Registering and removing webhooks (docs/api/webhooks.md). A registration is a WEBHOOK
 * record in its topic's WAL, so it lives and dies with the topic, survives restarts and
 * compaction, and its own group (`webhook:<id>`) gets every message published after it. Its
 * secret is in the record sealed (secret_box.ts), never plain (docs/security.md).
 */

import type { BrokerContext } from "../context.ts";
import { BrokerError } from "../errors.ts";
import { checkName } from "../names.ts";
import type { Topic, WebhookSpec } from "../topic.ts";
import { uuidv7 } from "../uuid.ts";
import { RecordType } from "../storage/record.ts";

/** Longest webhook URL accepted. */
export const MAX_WEBHOOK_URL_CHARS = 2048;
/** Longest secret accepted. */
const MAX_SECRET_CHARS = 1024;

/** A webhook with the topic it belongs to. */
export interface Webhook extends WebhookSpec {
  topic: Topic;
}

/** Refuses anything but an absolute http(s) URL of at most MAX_WEBHOOK_URL_CHARS. */
function checkUrl(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = url.length <= MAX_WEBHOOK_URL_CHARS ? new URL(url) : undefined;
  } catch { /* reported below */ }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    const shown = url.length > 64 ? `${url.slice(0, 64)}…` : url;
    throw new BrokerError(
      "invalid_parameter",
      `Invalid webhook url "${shown}": expected an absolute http or https URL of at most ${MAX_WEBHOOK_URL_CHARS} characters`,
    );
  }
  return url;
}

/** Registers a webhook on `name` (created if missing); 409 when the topic has that URL. */
export async function register(
  ctx: BrokerContext,
  name: string,
  url: string,
  secret = "",
): Promise<Webhook> {
  checkName(name, "topic");
  checkUrl(url);
  if (secret.length > MAX_SECRET_CHARS) {
    throw new BrokerError(
      "invalid_parameter",
      `Invalid secret: at most ${MAX_SECRET_CHARS} characters`,
    );
  }
  const now = ctx.now();
  const id = uuidv7(now);
  // Sealed before the checks: nothing may await between them and the commit.
  const sealedSecret = secret ? await ctx.secrets.seal(secret, id) : undefined;
  const topic = ctx.getTopic(name);
  for (const w of topic.webhooks.values()) {
    if (w.url === url) {
      throw new BrokerError(
        "already_exists",
        `Cannot register a webhook on "${name}": "${url}" is registered already`,
      );
    }
  }
  await topic.commit({
    type: RecordType.Webhook,
    seq: topic.nextSeq(),
    id,
    url,
    secret: "",
    createdAt: now,
    active: true,
    sealedSecret,
  }, now);
  return { ...topic.webhooks.get(id)!, topic };
}

/**
 * Seals the secrets that records from before sealing hold plain: a new WEBHOOK record for each
 * such webhook, same id, sealed. Returns the topics that had one, whose files still hold the
 * plain secret until they are compacted. Only where the broker may write (not a follower).
 */
export async function sealPlainSecrets(ctx: BrokerContext): Promise<Topic[]> {
  const sealed: Topic[] = [];
  for (const topic of [...ctx.eachTopic()]) {
    const plain = [...topic.webhooks.values()].filter((w) => w.secret !== "" && !w.sealedSecret);
    for (const w of plain) {
      const sealedSecret = await ctx.secrets.seal(w.secret, w.id);
      if (topic.webhooks.get(w.id) !== w) continue; // removed or replaced meanwhile
      const now = ctx.now();
      await topic.commit({
        type: RecordType.Webhook,
        seq: topic.nextSeq(),
        id: w.id,
        url: w.url,
        secret: "",
        createdAt: w.createdAt,
        active: true,
        sealedSecret,
      }, now);
    }
    if (plain.length) sealed.push(topic);
  }
  return sealed;
}

/** The webhook with this id, in whichever topic it is. */
export function findWebhook(ctx: BrokerContext, id: string): Webhook | undefined {
  for (const topic of ctx.eachTopic()) {
    const w = topic.webhooks.get(id);
    if (w) return { ...w, topic };
  }
  return undefined;
}

/** Removes a webhook, its group and what only it held; 404 when there is none. */
export async function remove(ctx: BrokerContext, id: string): Promise<Webhook> {
  const w = findWebhook(ctx, id);
  if (!w) throw new BrokerError("not_found", `Cannot delete webhook "${id}": no such webhook`);
  const now = ctx.now();
  await w.topic.commit({
    type: RecordType.Webhook,
    seq: w.topic.nextSeq(),
    id,
    url: "",
    secret: "",
    createdAt: now,
    active: false,
  }, now);
  return w;
}

/** The webhooks of one topic (or of every topic), oldest first. */
export function list(ctx: BrokerContext, name?: string): Webhook[] {
  const topics = name === undefined
    ? [...ctx.eachTopic()]
    : [ctx.findTopic(checkName(name, "topic"))];
  const out: Webhook[] = [];
  for (const topic of topics) {
    if (topic) { for (const w of topic.webhooks.values()) out.push({ ...w, topic }); }
  }
  return out.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
}
