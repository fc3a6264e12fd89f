/** Text for people: relative times ("3s ago"), spans, sizes, and messages as blocks. */

import type { MessageJson } from "../protocol/wire.ts";
import { shown, shownText } from "./escape.ts";
import type { Paint } from "./output.ts";

const UNITS: [string, number][] = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1_000],
];

/** A span in its two largest units, rounded down: `3s`, `4m 12s`, `2h 5m`, `3d 1h`. */
export function span(ms: number): string {
  ms = Math.max(0, Math.floor(ms));
  const i = UNITS.findIndex(([, unitMs]) => ms >= unitMs);
  if (i < 0) return `${ms}ms`;
  const [unit, unitMs] = UNITS[i]!;
  const n = Math.floor(ms / unitMs);
  const next = UNITS[i + 1];
  const m = next ? Math.floor((ms - n * unitMs) / next[1]) : 0;
  return m && next ? `${n}${unit} ${m}${next[0]}` : `${n}${unit}`;
}

/** When something happened or will, relative to `now`: `3s ago`, `in 5m`, `just now`. */
export function relative(at: string | number | Date, now = Date.now()): string {
  const t = at instanceof Date ? at.getTime() : typeof at === "number" ? at : Date.parse(at);
  if (Number.isNaN(t)) return String(at);
  const d = now - t;
  if (Math.abs(d) < 1_000) return "just now";
  const [first] = span(Math.abs(d)).split(" ");
  return d > 0 ? `${first} ago` : `in ${first}`;
}

/** An age in seconds (`oldest_age_seconds`) as "3m ago", or "-" when there is nothing. */
export function age(seconds: number | undefined, present = true): string {
  if (!present || seconds === undefined) return "-";
  return seconds < 1 ? "just now" : `${span(seconds * 1000).split(" ")[0]} ago`;
}

/** Bytes in binary units: `512 B`, `1.5 KiB`, `20 MiB`. */
export function size(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let n = bytes;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0
    ? `${n} B`
    : `${n < 10 ? n.toFixed(1).replace(/\.0$/, "") : Math.round(n)} ${units[i]}`;
}

/** "1 message", "3 messages". */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

/**
 * A message for people: a header line (id, topic, age, retries, priority and what else is set),
 * its X-MQ-* headers, then the payload as text, or a note on its size when it is binary.
 */
export function messageBlock(msg: MessageJson, paint: Paint, now = Date.now()): string {
  const facts = [paint.dim(shown(relative(msg.timestamp, now)))];
  if (msg.retry_count) facts.push(paint.yellow(`retry ${msg.retry_count}`));
  if (msg.priority && msg.priority !== "normal") facts.push(shown(msg.priority));
  if (msg.group) facts.push(`group ${shown(msg.group)}`);
  if (msg.expires_at) facts.push(`expires ${shown(relative(msg.expires_at, now))}`);
  if (msg.redrive_count) facts.push(`redriven ${msg.redrive_count}×`);
  if (msg.reason) facts.push(`reason: ${shown(msg.reason)}`);
  const lines = [`${paint.cyan(shown(msg.id))}  ${shown(msg.topic)}  ${facts.join("  ")}`];
  for (const [name, value] of Object.entries(msg.headers ?? {})) {
    lines.push(paint.dim(shown(`${name}: ${value}`)));
  }
  lines.push(
    msg.payload_text === undefined
      ? paint.dim(`(${size(base64Length(msg.payload))} of binary; --json shows it)`)
      : shownText(msg.payload_text.replace(/\n$/, "")),
  );
  return lines.join("\n");
}

/** The byte length of a Base64 text. */
function base64Length(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.floor(b64.length * 3 / 4) - pad;
}
