/**
 * A server-sent-events reader over fetch, for tests that need what EventSource hides: the
 * `event:` names, comments (`: ping`), sending `Last-Event-ID`, and seeing the stream end.
 */

/** One event (or comment) as it came over the wire. */
export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface SseReader {
  status: number;
  headers: Headers;
  /** The next event, or undefined once the stream has ended. */
  next(): Promise<SseEvent | undefined>;
  /** The next `n` events that are not comments. */
  take(n: number): Promise<SseEvent[]>;
  close(): Promise<void>;
}

/** Opens `url` as an event stream. */
export async function openSse(
  url: string,
  headers: Record<string, string> = {},
): Promise<SseReader> {
  const ac = new AbortController();
  const res = await fetch(url, {
    headers: { accept: "text/event-stream", ...headers },
    signal: ac.signal,
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let ended = false;
  const next = async (): Promise<SseEvent | undefined> => {
    while (true) {
      const cut = buffer.indexOf("\n\n");
      if (cut >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const ev: SseEvent = {};
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) ev.comment = line.slice(1).trim();
          else {
            const i = line.indexOf(":");
            const [field, value] = i < 0
              ? [line, ""]
              : [line.slice(0, i), line.slice(i + 1).trimStart()];
            if (field === "id" || field === "event") ev[field] = value;
            else if (field === "data") {
              ev.data = ev.data === undefined ? value : `${ev.data}\n${value}`;
            }
          }
        }
        return ev;
      }
      if (ended) return undefined;
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) ended = true;
      else buffer += value;
    }
  };
  return {
    status: res.status,
    headers: res.headers,
    next,
    async take(n) {
      const out: SseEvent[] = [];
      while (out.length < n) {
        const ev = await next();
        if (!ev) throw new Error(`the stream ended after ${out.length} of ${n} events`);
        if (ev.comment === undefined) out.push(ev);
      }
      return out;
    },
    async close() {
      ac.abort();
      await reader.cancel().catch(() => {});
    },
  };
}
