// @ts-check
/** How figures, times and payloads read on the page. */

const NUMBER = new Intl.NumberFormat("en");

/** 12,345. @param {number} n */
export function num(n) {
  return NUMBER.format(n);
}

/** Events per second: one decimal below 10, whole above. @param {number | undefined} n */
export function rate(n) {
  if (n === undefined) return "–";
  if (n === 0) return "0";
  return n < 10 ? n.toFixed(1) : NUMBER.format(Math.round(n));
}

/** An age or duration in seconds as "3m 20s". @param {number} seconds */
export function age(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** Bytes as "1.5 KiB". @param {number} n */
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** A local time of day with seconds, for tables. @param {string} iso */
export function clock(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleTimeString("en-GB", { hour12: false });
}

/** A local date and time. @param {string} iso */
export function dateTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString("en-GB", { hour12: false });
}

/** "in 25s" or "3s ago" from now. @param {string} iso @param {number} [now] */
export function relative(iso, now = Date.now()) {
  const ms = new Date(iso).getTime() - now;
  if (Number.isNaN(ms)) return iso;
  return ms >= 0 ? `in ${age(ms / 1000)}` : `${age(-ms / 1000)} ago`;
}

/** Characters of a payload shown at most; the rest is cut with a note. */
export const SHOWN_CHARS = 64 * 1024;

/** The payload's bytes from Base64. @param {string} b64 */
export function decodeBase64(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** A hex dump: offset, 16 bytes, and their printable ASCII. @param {Uint8Array} b @param {number} [max] */
export function hexDump(b, max = 4096) {
  const lines = [];
  const n = Math.min(b.length, max);
  for (let off = 0; off < n; off += 16) {
    const chunk = b.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(chunk, (x) => x.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : "."))
      .join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (b.length > n) lines.push(`… ${num(b.length - n)} more bytes`);
  return lines.join("\n");
}

/**
 * The ways a message's payload can be shown: `json` (pretty-printed) when the text parses as
 * JSON, `text` when it is UTF-8, and always `hex` and `base64`; `best` is the first of those.
 * @param {{ payload: string, payload_text?: string }} msg
 */
export function payloadForms(msg) {
  /** @type {Record<string, string>} */
  const forms = {};
  if (msg.payload_text !== undefined) {
    const t = msg.payload_text;
    try {
      const v = JSON.parse(t);
      if (v !== null && typeof v === "object") forms.json = JSON.stringify(v, null, 2);
    } catch { /* not JSON */ }
    forms.text = t;
  }
  const raw = decodeBase64(msg.payload);
  forms.hex = hexDump(raw);
  forms.base64 = msg.payload;
  const best = forms.json !== undefined ? "json" : forms.text !== undefined ? "text" : "hex";
  return { forms, best, size: raw.length };
}

/** A one-line preview of a payload for tables. @param {{ payload: string, payload_text?: string }} msg @param {number} [max] */
export function preview(msg, max = 80) {
  if (msg.payload_text === undefined) return `binary, ${bytes(decodeBase64(msg.payload).length)}`;
  const t = msg.payload_text.replace(/\s+/g, " ");
  return t.length > max ? `${t.slice(0, max)}…` : t;
}

/** Cuts a long text for display. @param {string} t */
export function shown(t) {
  return t.length > SHOWN_CHARS
    ? `${t.slice(0, SHOWN_CHARS)}\n… ${num(t.length - SHOWN_CHARS)} more characters`
    : t;
}
