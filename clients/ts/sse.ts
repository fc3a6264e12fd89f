/**
 * A parser of the `text/event-stream` format as the HTML standard defines it: lines end in CRLF,
 * LF or CR; `data:` lines join with newlines; `event:` names the event; `id:` sets the last event
 * id, which carries on to later events that have none; `:` lines are comments (pings). Text in,
 * events out: the network is the caller's.
 */

/** One dispatched event. */
export interface SseEvent {
  /** `message` unless an `event:` line named it. */
  type: string;
  data: string;
  /** The last event id as of this event (it persists across events without an `id:`). */
  lastEventId: string;
}

/** Turns chunks of decoded text into events. */
export class SseParser {
  #buffer = "";
  #afterCr = false;
  #data: string[] = [];
  #type = "";

  /** @param lastEventId the id to start from (a resumed stream's) */
  constructor(public lastEventId = "") {}

  /** Feeds a chunk of text; returns the events it completed. */
  feed(text: string): SseEvent[] {
    // A CR that ended the last chunk ended its line; an LF starting this one is its other half.
    if (this.#afterCr && text.startsWith("\n")) text = text.slice(1);
    this.#buffer += text;
    const out: SseEvent[] = [];
    let start = 0;
    while (start < this.#buffer.length) {
      const lf = this.#buffer.indexOf("\n", start);
      const cr = this.#buffer.indexOf("\r", start);
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      if (end < 0) break;
      const line = this.#buffer.slice(start, end);
      start = end + (end === cr && this.#buffer[cr + 1] === "\n" ? 2 : 1);
      const event = this.#line(line);
      if (event) out.push(event);
    }
    this.#afterCr = this.#buffer.endsWith("\r") && start === this.#buffer.length;
    this.#buffer = this.#buffer.slice(start);
    return out;
  }

  #line(line: string): SseEvent | undefined {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "event":
        this.#type = value;
        break;
      case "id":
        if (!value.includes("\0")) this.lastEventId = value;
        break;
    }
    return undefined;
  }

  #dispatch(): SseEvent | undefined {
    const data = this.#data;
    const type = this.#type || "message";
    this.#data = [];
    this.#type = "";
    if (!data.length) return undefined;
    return { type, data: data.join("\n"), lastEventId: this.lastEventId };
  }
}
