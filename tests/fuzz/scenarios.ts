/**
 * Valid request sequences the fuzzer mixes into its campaign, so the broker reaches the states
 * single requests rarely do: a message at its third lease end (`visibility=1ms`), requeues into
 * `{topic}.dlq` (also for names of 195–200 characters, whose `.dlq` name is over the limit),
 * redrive, groups, topic settings at their caps, long-poll hand-offs and broadcasts. One has its
 * own oracle: HEAD on a GET route must not take or delete a message.
 */

import type { FuzzRequest } from "./generator.ts";
import type { Answer } from "./http.ts";
import type { HeaderList, Keys } from "./inputs.ts";
import { type Bytes, GROUPS, LONG_TOPICS, type Rand, TOPICS } from "./values.ts";

/** What a scenario may do: send through the campaign's checks, report a finding, wait. */
export interface Session {
  keys: Keys;
  /** Sends one request (checked like any other); undefined when no answer came. */
  send(req: FuzzRequest): Promise<Answer | undefined>;
  /** Records a violation a scenario's own oracle found. */
  fail(what: string, req: FuzzRequest, answer?: Answer): void;
  sleep(ms: number): Promise<void>;
}

/** One scenario: a few valid requests in an order that builds up state, on `topic` if given. */
export type Scenario = (s: Session, r: Rand, topic?: string) => Promise<void>;

const enc = new TextEncoder();
const utf8 = new TextDecoder();

/** A request with the admin key, tagged with the scenario's name. */
function req(
  s: Session,
  tag: string,
  method: string,
  path: string,
  init: { json?: unknown; body?: string | Bytes; headers?: HeaderList } = {},
): FuzzRequest {
  const headers: HeaderList = [["authorization", `Bearer ${s.keys.admin}`], ...init.headers ?? []];
  let body = typeof init.body === "string" ? enc.encode(init.body) : init.body;
  if (init.json !== undefined) {
    body = enc.encode(JSON.stringify(init.json));
    headers.push(["content-type", "application/json"]);
  }
  return { method, path, headers, body, tags: [`scenario:${tag}`] };
}

/** The answer's JSON body, or undefined. */
function json(a: Answer | undefined): Record<string, unknown> | undefined {
  if (!a || a.body.length === 0) return undefined;
  try {
    return JSON.parse(utf8.decode(a.body));
  } catch {
    return undefined;
  }
}

/** A pool topic, long names (whose `.dlq` name is too long) weighted up. */
function pickTopic(r: Rand): string {
  return r.chance(0.4) ? r.pick(LONG_TOPICS) : r.pick(TOPICS.filter((t) => !t.endsWith(".dlq")));
}

const q = encodeURIComponent;

/** Purge, publish one message, let three 1 ms leases end: the third moves it to the DLQ. */
async function leaseEnds(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  await s.send(req(s, "lease-ends", "DELETE", `/api/queues/purge?queue=${q(t)}`));
  await s.send(req(s, "lease-ends", "POST", `/publish/${q(t)}`, { body: `lease-${r.int(1e6)}` }));
  for (let i = 0; i < 3; i++) {
    await s.send(req(s, "lease-ends", "GET", `/consume/${q(t)}?visibility=1ms`));
    await s.sleep(30); // the broker's alarm ends the lease at its time
  }
  await s.send(req(s, "lease-ends", "GET", `/api/queues/peek?queue=${q(t)}.dlq`));
  await s.send(req(s, "lease-ends", "POST", `/api/queues/redrive?queue=${q(t)}.dlq`));
  await s.send(req(s, "lease-ends", "GET", "/api/queues"));
}

/** Consume and requeue the same message three times; the third requeue dead-letters it. */
async function requeueToDlq(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const tag = "requeue-dlq";
  await s.send(req(s, tag, "DELETE", `/api/queues/purge?queue=${q(t)}`));
  await s.send(req(s, tag, "POST", `/publish/${q(t)}?priority=high`, {
    body: `{"k":"v","n":${r.int(9)}}`,
    headers: [["x-mq-trace", `t-${r.int(1e6)}`]],
  }));
  for (let i = 0; i < 3; i++) {
    const m = json(await s.send(req(s, tag, "GET", `/consume/${q(t)}?visibility=30s`)));
    if (!m) break;
    const query = r.chance(0.5) ? `?reason=attempt-${i}` : "";
    await s.send(req(s, tag, "POST", `/requeue${query}`, { json: { ...m, reason: "fuzz" } }));
  }
  await s.send(req(s, tag, "GET", `/consume/${q(t)}.dlq?limit=10&peek=true`));
  const target = r.chance(0.5) ? t : `${t}.dlq`;
  await s.send(req(s, tag, "POST", `/api/queues/redrive?queue=${q(target)}`));
  const m = json(await s.send(req(s, tag, "GET", `/consume/${q(t)}`)));
  if (typeof m?.id === "string") await s.send(req(s, tag, "POST", `/ack/${q(t)}/${m.id}`));
}

/** A named group: create, publish, consume, touch, ack one, batch-ack the rest, list. */
async function groups(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const g = r.pick(GROUPS.filter((x) => x !== ""));
  const tag = "groups";
  await s.send(req(s, tag, "POST", "/api/groups", { json: { topic: t, group: g } }));
  for (let i = 0; i < 3; i++) await s.send(req(s, tag, "POST", `/publish/${q(t)}`, { body: "g" }));
  const got = json(await s.send(req(s, tag, "GET", `/consume/${q(t)}?group=${q(g)}&limit=3`)));
  const ids = Array.isArray(got) ? got.map((m) => (m as { id: string }).id) : [];
  if (ids[0]) {
    await s.send(req(s, tag, "POST", `/touch/${q(t)}/${ids[0]}?group=${q(g)}&by=1s`));
    await s.send(req(s, tag, "POST", `/ack/${q(t)}/${ids[0]}?group=${q(g)}`));
  }
  const rest = { ids: [...ids.slice(1), crypto.randomUUID()], group: g };
  await s.send(req(s, tag, "POST", `/ack/${q(t)}`, { json: rest }));
  await s.send(req(s, tag, "GET", `/api/groups?topic=${q(t)}`));
}

/** A topic created with tight settings, filled past its cap, leased, purged and deleted. */
async function topicAtCap(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const tag = "topic-cap";
  await s.send(req(s, tag, "DELETE", `/api/queues/delete?queue=${q(t)}`));
  const policy = r.pick(["reject", "drop-oldest"]);
  const settings = { name: t, policy, retain: "50ms", visibility: "1ms", max_messages: 2 };
  await s.send(req(s, tag, "POST", "/api/topics", { json: settings }));
  for (let i = 0; i < 3; i++) {
    await s.send(req(s, tag, "POST", `/publish/${q(t)}?delay=${r.pick(["0s", "20ms"])}`, {
      body: `cap-${i}`,
    }));
  }
  await s.send(req(s, tag, "GET", `/consume/${q(t)}?limit=2`));
  await s.sleep(60);
  await s.send(req(s, tag, "GET", "/api/stats"));
  await s.send(req(s, tag, "GET", "/metrics"));
  await s.send(req(s, tag, "DELETE", `/api/queues/purge?queue=${q(t)}`));
}

/** A parked long poll handed a published (or broadcast) message. */
async function longPoll(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const tag = "long-poll";
  const g = r.pick(GROUPS);
  const filter = r.chance(0.3) ? "&filter_key=k&filter_val=v" : "";
  const waiting = s.send(req(s, tag, "GET", `/consume/${q(t)}?timeout=1s&group=${q(g)}${filter}`));
  await s.sleep(30);
  const broadcast = r.chance(0.5) ? "?broadcast=true" : "";
  await s.send(req(s, tag, "POST", `/publish/${q(t)}${broadcast}`, { body: '{"k":"v"}' }));
  await waiting;
}

/** Idempotency keys: one header key twice, then `idempotency=auto` twice. */
async function idempotency(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const key: HeaderList = [["idempotency-key", `idem-${r.int(1e9)}`]];
  for (let i = 0; i < 2; i++) {
    await s.send(req(s, "idempotency", "POST", `/publish/${q(t)}`, { body: "i", headers: key }));
  }
  for (let i = 0; i < 2; i++) {
    await s.send(req(s, "idempotency", "POST", `/publish/${q(t)}?idempotency=auto`, { body: "a" }));
  }
}

/** The dashboard's interface: publish, peek, consume without ack, ack, webhooks. */
async function dashboard(s: Session, r: Rand, topic?: string): Promise<void> {
  const t = topic ?? pickTopic(r);
  const tag = "dashboard";
  const msg = { queue: t, payload: "d", priority: r.pick(["high", "low"]), ttl: "1h" };
  await s.send(req(s, tag, "POST", "/api/queues/publish", { json: msg }));
  await s.send(req(s, tag, "GET", `/api/queues/peek?queue=${q(t)}&limit=10`));
  const m = json(
    await s.send(req(s, tag, "POST", "/api/queues/consume", {
      json: { queue: t, auto_ack: false },
    })),
  );
  if (typeof m?.id === "string") await s.send(req(s, tag, "POST", `/ack/${q(t)}/${m.id}`));
  await s.send(req(s, tag, "GET", `/api/queues/webhooks?queue=${q(t)}`));
}

/** A 2 MiB message (the limit) through publish, consume and ack, on its own topic. */
async function bigPayload(s: Session, r: Rand): Promise<void> {
  const t = `fzp-big-${r.int(1e9)}`;
  const body = new Uint8Array(2 * 1024 * 1024).fill(0x61);
  await s.send(req(s, "big", "POST", `/publish/${t}`, { body }));
  const m = json(await s.send(req(s, "big", "GET", `/consume/${t}`)));
  if (typeof m?.id === "string") await s.send(req(s, "big", "POST", `/ack/${t}/${m.id}`));
  await s.send(req(s, "big", "DELETE", `/api/queues/delete?queue=${t}`));
}

const HEAD_QUERIES = [
  "auto_ack=true",
  "auto_ack=1",
  "auto_ack=true&limit=5",
  "limit=1000&auto_ack=true",
  "peek=true&auto_ack=true",
  "auto_ack=true&visibility=1ms",
  "",
];

/** Oracle: HEAD /consume (any query) must leave the message held by its topic. */
async function headIsSafe(s: Session, r: Rand): Promise<void> {
  const t = `fzp-head-${r.int(1e9)}`;
  const tag = "head-is-safe";
  const pub = await s.send(req(s, tag, "POST", `/publish/${t}`, { body: "h" }));
  if (pub?.status !== 201) return;
  const head = req(s, tag, "HEAD", `/consume/${t}?${r.pick(HEAD_QUERIES)}`);
  const answer = await s.send(head);
  await s.send(req(s, tag, "HEAD", `/api/queues/peek?queue=${t}`));
  const list = json(await s.send(req(s, tag, "GET", "/api/queues")));
  const item = (Array.isArray(list) ? list : []).find((x) => x?.name === t);
  const held = item?.held ?? (item ? item.depth + item.in_flight + item.delayed : undefined);
  if (held !== 1) {
    s.fail(
      `HEAD changed state: the topic holds ${held ?? "nothing"} messages after it, not 1`,
      head,
      answer,
    );
  }
  await s.send(req(s, tag, "DELETE", `/api/queues/delete?queue=${t}`));
}

/** Every scenario by name; the campaign picks among them with its seed. */
export const SCENARIOS: Record<string, Scenario> = {
  leaseEnds,
  requeueToDlq,
  groups,
  topicAtCap,
  longPoll,
  idempotency,
  dashboard,
  bigPayload,
  headIsSafe,
};
