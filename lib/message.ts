/**
 * @module A message as the broker holds it (stored once per topic), a group's delivery of it,
 * and the payload filter of consumes and streams. Its JSON shape is routes/wire.ts's.
 */

import type { Priority } from "../protocol/wire.ts";
import type { PublishRecord } from "./storage/record.ts";
import { heldSize, MESSAGE_OVERHEAD_BYTES } from "./memory/budget.ts";
import type { PayloadFile } from "./memory/payload_file.ts";

/** A payload's place in a WAL file. */
export interface PayloadLocation {
  file: PayloadFile;
  offset: number;
}

/** Priorities in delivery order; a message stores the index. */
export const PRIORITIES = ["high", "normal", "low"] as const satisfies readonly Priority[];
export const NORMAL = 1;

/** What a stored message is made from: a publish record's fields. */
export type MessageFields = Pick<
  PublishRecord,
  | "id"
  | "seq"
  | "timestamp"
  | "payload"
  | "priority"
  | "expiresAt"
  | "headers"
  | "idemKey"
  | "redriveCount"
  | "origin"
  | "reason"
>;

/**
 * The fields most messages leave empty (no TTL, idempotency key, redrive, dead-letter origin or
 * reason), kept out of line: a message without any of them holds one empty slot, not five.
 */
interface Rare {
  expiresAt: number;
  idemKey: string | undefined;
  redriveCount: number;
  origin: string | undefined;
  reason: string | undefined;
}

/**
 * One published message; every group's delivery of it shares it. The payload is kept as
 * (buffer, offset, length) rather than a Uint8Array: a view object costs ~100 bytes per
 * message held, the getter's short-lived view costs nothing that lasts. Once its record is
 * durable the message also knows where the payload is in the WAL file, so a payload can leave
 * memory (lib/memory/payload_cache.ts) and be read from there.
 */
export class StoredMessage {
  readonly id: string;
  /**
   * Sequence number of the last PUBLISH record that stored it in its topic: the one that created
   * it, or a later move that joined it (a second dead-letter, a redrive); its stream event id.
   */
  seq: number;
  /** Publish time, ms since the epoch. */
  readonly timestamp: number;
  readonly priority: number;
  /** Stored `X-MQ-*` headers (and Content-Type) as [name, value, ...], names lower-cased. */
  readonly headers: string[] | undefined;
  /** Bytes of its WAL record, for compaction accounting. */
  size: number;
  /** Groups that still hold it; at 0 it leaves memory. */
  pending = 0;
  /** Its deliveries: the first group's here, any further ones in `rest` (no per-group Map). */
  first: Delivery | undefined = undefined;
  rest: Delivery[] | undefined = undefined;
  /**
   * expiresAt, idemKey, redriveCount, origin and reason (see their getters); undefined while all
   * are empty.
   */
  #rare: Rare | undefined;
  /** The payload's memory; undefined once it is read from the file instead. */
  #buffer: ArrayBufferLike | undefined;
  readonly #offset: number;
  readonly #length: number;
  /** Where the payload is in a WAL file, once its record is durable there. */
  #file: PayloadFile | undefined;
  #fileOffset = 0;

  /**
   * With `disk`, the payload stays in the file (f.payload is only read for its length), unless
   * `keep`: then f.payload is its memory and `disk` only where it is in the file too.
   */
  constructor(f: MessageFields, size: number, disk?: PayloadLocation, keep = false) {
    this.id = f.id;
    this.seq = f.seq;
    this.timestamp = f.timestamp;
    this.priority = f.priority;
    this.headers = f.headers;
    this.size = size;
    if (f.expiresAt || f.idemKey || f.redriveCount || f.origin || f.reason) {
      this.#rare = {
        expiresAt: f.expiresAt,
        idemKey: f.idemKey,
        redriveCount: f.redriveCount,
        origin: f.origin,
        reason: f.reason,
      };
    }
    this.#offset = f.payload.byteOffset;
    this.#length = f.payload.length;
    if (disk && !keep) this.toDisk(disk);
    else {
      this.#buffer = f.payload.buffer;
      this.locate(disk);
    }
  }

  /** 0 when the message never expires. */
  get expiresAt(): number {
    return this.#rare?.expiresAt ?? 0;
  }

  get idemKey(): string | undefined {
    return this.#rare?.idemKey;
  }

  get redriveCount(): number {
    return this.#rare?.redriveCount ?? 0;
  }

  /** Set when a redrive joins a message some group still holds (the count is the message's). */
  set redriveCount(count: number) {
    if (this.#rare || count) this.#rareFields().redriveCount = count;
  }

  /** The rare fields, made empty on first need. */
  #rareFields() {
    return this.#rare ??= {
      expiresAt: 0,
      idemKey: undefined,
      redriveCount: 0,
      origin: undefined,
      reason: undefined,
    };
  }

  /**
   * The group a dead-lettered message came from; when several groups dead-lettered it, their
   * names comma-separated (the default group as an empty name). Undefined: the default group.
   */
  get origin(): string | undefined {
    return this.#rare?.origin;
  }

  set origin(origin: string | undefined) {
    if (this.#rare || origin !== undefined) this.#rareFields().origin = origin;
  }

  /** Why it was last requeued or dead-lettered. */
  get reason(): string | undefined {
    return this.#rare?.reason;
  }

  /** Leaves the payload in its WAL file (or another generation of it) and drops the memory. */
  toDisk(at: PayloadLocation): void {
    this.#file = at.file;
    this.#fileOffset = at.offset;
    this.#buffer = undefined;
  }

  /**
   * Records where the payload is on disk (undefined: nowhere known) and keeps it in memory, if
   * it is there; a payload already read from the file just moves to `at`.
   */
  locate(at: PayloadLocation | undefined): void {
    if (!at && !this.#buffer) return; // the file is all it has: keep reading the old one
    this.#file = at?.file;
    this.#fileOffset = at?.offset ?? 0;
  }

  /** Where the payload is on disk, if its place is known. */
  get location(): PayloadLocation | undefined {
    return this.#file && { file: this.#file, offset: this.#fileOffset };
  }

  /** The WAL file that holds the payload, once known (see fileOffset). */
  get file(): PayloadFile | undefined {
    return this.#file;
  }

  get fileOffset(): number {
    return this.#fileOffset;
  }

  /** Whether the payload is read from its WAL file rather than kept in memory. */
  get onDisk(): boolean {
    return this.#buffer === undefined;
  }

  /** What it holds against the memory budget: the payload unless on disk, and the overhead. */
  get heldBytes(): number {
    return (this.#buffer ? this.#length : 0) + MESSAGE_OVERHEAD_BYTES;
  }

  /** What it counts toward its topic's max_bytes, wherever its payload is. */
  get storedBytes(): number {
    return heldSize(this.#length);
  }

  /** This message's delivery in `group`, if that group holds it. */
  deliveryOf(group: DeliveryGroup): Delivery | undefined {
    if (this.first?.group === group) return this.first;
    if (this.rest) { for (const d of this.rest) if (d.group === group) return d; }
    return undefined;
  }

  /** Every group's delivery of it (a copy: callers remove while walking). */
  deliveries(): Delivery[] {
    if (!this.first) return [];
    return this.rest ? [this.first, ...this.rest] : [this.first];
  }

  attach(d: Delivery): void {
    if (!this.first) this.first = d;
    else (this.rest ??= []).push(d);
  }

  detach(d: Delivery): void {
    if (this.first === d) {
      this.first = this.rest?.shift();
    } else if (this.rest) {
      const i = this.rest.indexOf(d);
      if (i >= 0) this.rest.splice(i, 1);
    }
    if (this.rest?.length === 0) this.rest = undefined;
  }

  /** Length of the payload in bytes. */
  get payloadBytes(): number {
    return this.#length;
  }

  /**
   * Its fields, the payload copied out, to rebuild it where its topic is not held (another
   * worker answering a consume, lib/remote_broker.ts): `new StoredMessage(fields, 0)`.
   */
  fields(): MessageFields {
    return {
      id: this.id,
      seq: this.seq,
      timestamp: this.timestamp,
      payload: this.readPayload().slice(),
      priority: this.priority,
      expiresAt: this.expiresAt,
      headers: this.headers,
      idemKey: this.idemKey,
      redriveCount: this.redriveCount,
      origin: this.origin,
      reason: this.reason,
    };
  }

  /**
   * The payload bytes (keep them in a local; do not write to them): a fresh view of the shared
   * slab, or, for a payload on disk, a synchronous positioned read of its WAL file, or a view of
   * the stretch prefetchPayloads read, which the next prefetch of that file overwrites: use them
   * before the next await, and take payloadToKeep for anything kept longer. A method, not a
   * getter, so that the file read shows where it happens.
   */
  readPayload(): Uint8Array {
    if (!this.#buffer) return this.#file!.read(this.#fileOffset, this.#length);
    return new Uint8Array(this.#buffer, this.#offset, this.#length);
  }

  /**
   * The payload for a new message to keep (a move to another topic): the shared slab when in
   * memory, else a read into a buffer of its own, never a view of a prefetched stretch.
   */
  get payloadToKeep(): Uint8Array {
    if (!this.#buffer) return this.#file!.read(this.#fileOffset, this.#length, true);
    return this.readPayload();
  }
}

const interned = new Map<string, string[]>();
/** Distinct header lists kept for sharing; past this, lists are stored as they come. */
const MAX_INTERNED = 1024;

/**
 * The one shared copy of a header list seen before (most publishers send the same few), so
 * 100,000 messages with `Content-Type: application/json` hold one array, not 100,000.
 */
export function internHeaders(headers: string[] | undefined): string[] | undefined {
  if (!headers || headers.length === 0) return undefined;
  if (headers.length > 8) return headers;
  if (sameList(headers, lastInterned)) return lastInterned;
  const key = headers.join("\u0000");
  if (key.length > 512) return headers;
  const seen = interned.get(key);
  if (seen) return lastInterned = seen;
  if (interned.size < MAX_INTERNED) interned.set(key, lastInterned = headers);
  return headers;
}

/** The list returned last: consecutive messages (one publisher, a replayed log) repeat it. */
let lastInterned: string[] = [];

function sameList(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Where a delivery is; each delivery is in exactly one state. */
export const enum State {
  Ready = 0,
  Delayed = 1,
  InFlight = 2,
  Done = 3,
}

/**
 * A delivery's group as a message sees it: lib/delivery/group.ts's Group, named by this shape so that
 * group.ts (which needs State) and this module do not import each other.
 */
export interface DeliveryGroup {
  readonly name: string;
  /** Ends a delivery whatever its state. */
  remove(d: Delivery): void;
}

/** One group's copy of a message: its own state, attempts and lease. */
export interface Delivery {
  readonly msg: StoredMessage;
  readonly group: DeliveryGroup;
  state: State;
  retryCount: number;
  /** When a delayed delivery becomes ready, or when an in-flight lease ends. */
  at: number;
  /** Bumped on every delivery and touch, so stale lease-heap entries can be told apart. */
  lease: number;
  reason: string | undefined;
}

const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** Whether a payload passes a consume/stream filter (docs/api/consume.md). */
export function matchesFilter(
  payload: Uint8Array,
  key: string,
  value: string | undefined,
): boolean {
  return matchesObject(parseObject(payload), key.split("."), value);
}

/** What a filtered consumer takes: only the messages it accepts. */
export interface MessageFilter {
  accepts(msg: StoredMessage): boolean;
}

/**
 * A consume's payload filter (docs/api/consume.md): a key path and, optionally, the value's text.
 * The object parsed from the message examined last is kept (for payloads up to
 * PARSE_MEMO_MAX_BYTES), so many parked consumers looking at one new message parse it once.
 */
export class PayloadFilter implements MessageFilter {
  readonly #path: string[];

  constructor(readonly key: string, readonly value: string | undefined) {
    this.#path = key.split(".");
  }

  /** Whether `msg`'s payload passes. */
  accepts(msg: StoredMessage): boolean {
    return matchesObject(parsedObject(msg), this.#path, this.value);
  }
}

/** Largest payload whose parse is kept for the next filter: a bound on what the memo holds. */
const PARSE_MEMO_MAX_BYTES = 64 * 1024;
/** The message parsed last (held weakly: the memo keeps no payload alive) and its object. */
let memoMsg: WeakRef<StoredMessage> | undefined;
let memoDoc: object | undefined;

function parsedObject(msg: StoredMessage): object | undefined {
  if (memoMsg?.deref() === msg) return memoDoc;
  const doc = parseObject(msg.readPayload());
  if (msg.payloadBytes <= PARSE_MEMO_MAX_BYTES) [memoMsg, memoDoc] = [new WeakRef(msg), doc];
  return doc;
}

/** The JSON object a payload holds; undefined for anything else. */
function parseObject(payload: Uint8Array): object | undefined {
  if (payload[0] !== 0x7b /* { */ && !startsWithObject(payload)) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(textDecoder.decode(payload));
  } catch {
    return undefined;
  }
  return doc && typeof doc === "object" && !Array.isArray(doc) ? doc : undefined;
}

function matchesObject(doc: object | undefined, path: string[], value: string | undefined) {
  if (!doc) return false;
  let cur: unknown = doc;
  for (const part of path) {
    if (!cur || typeof cur !== "object" || !Object.hasOwn(cur, part)) return false;
    cur = (cur as Record<string, unknown>)[part];
  }
  if (value === undefined) return true;
  if (typeof cur === "string") return cur === value;
  try {
    return JSON.stringify(cur) === value;
  } catch {
    return false; // nested too deep to write out: it cannot equal a query value
  }
}

function startsWithObject(payload: Uint8Array): boolean {
  for (let i = 0; i < payload.length && i < 64; i++) {
    const c = payload[i]!;
    if (c === 0x7b) return true;
    if (
      c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0xef && c !== 0xbb && c !== 0xbf
    ) {
      return false;
    }
  }
  return false;
}
