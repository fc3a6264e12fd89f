/**
 * @module The link between two workers of one broker (BROKER_WORKERS, docs/architecture.md
 * "Workers"): a MessagePort that carries HTTP requests one way and their answers back. A body
 * crosses as a transferred ArrayBuffer, moved and not copied; an event stream's body crosses as
 * chunks until it ends, or until the asker's reader cancels it (the client left), which cancels
 * the answering worker's stream too. Either end can ask: each side answers with `serve`.
 */

/** A request as it crosses: what `new Request` needs, the body already read. */
interface Asked {
  t: "ask";
  id: number;
  method: string;
  url: string;
  headers: [string, string][];
  body: ArrayBuffer | null;
}

/** What crosses a link. */
type LinkMessage =
  | Asked
  | {
    t: "answer";
    id: number;
    status: number;
    headers: [string, string][];
    /** The whole body, or null when it follows as chunks (`streamed`) or there is none. */
    body: ArrayBuffer | null;
    streamed: boolean;
  }
  | { t: "chunk"; id: number; data: ArrayBuffer }
  | { t: "end"; id: number }
  | { t: "cancel"; id: number };

/** Answers whose body is an event stream follow as chunks; every other body crosses whole. */
function streamed(res: Response): boolean {
  return (res.headers.get("content-type") ?? "").startsWith("text/event-stream");
}

/** A buffer that can be transferred: the bytes' own buffer when they fill it, else a copy. */
function ownBuffer(bytes: Uint8Array): ArrayBuffer {
  const b = bytes.buffer;
  if (b instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === b.byteLength) {
    return b;
  }
  return bytes.slice().buffer as ArrayBuffer;
}

/** One end of a link between two workers. */
export class WorkerLink {
  #next = 0;
  readonly #waiting = new Map<number, (res: Response) => void>();
  /** Streamed answers being received, by request id. */
  readonly #incoming = new Map<number, ReadableStreamDefaultController<Uint8Array>>();
  /** Streamed answers being sent, by the other end's request id. */
  readonly #outgoing = new Map<number, ReadableStreamDefaultReader<Uint8Array>>();

  constructor(
    readonly port: MessagePort,
    /** Answers what the other end asks: this worker's handler, for a request it owns. */
    readonly serve: (req: Request) => Promise<Response>,
  ) {
    port.onmessage = (e: MessageEvent<LinkMessage>) => this.#received(e.data);
  }

  /**
   * Asks the worker at the other end to answer a request; `body` is transferred (the caller
   * must not use it again). Resolves with its answer as a Response.
   */
  ask(method: string, url: string, headers: Headers, body: Uint8Array | null): Promise<Response> {
    const id = ++this.#next;
    const buffer = body && body.length ? ownBuffer(body) : null;
    const msg: Asked = { t: "ask", id, method, url, headers: [...headers], body: buffer };
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.port.postMessage(msg, buffer ? [buffer] : []);
    });
  }

  close(): void {
    this.port.close();
  }

  #received(m: LinkMessage): void {
    switch (m.t) {
      case "ask":
        return void this.#answer(m);
      case "answer":
        return this.#answered(m);
      case "chunk":
        return this.#incoming.get(m.id)?.enqueue(new Uint8Array(m.data));
      case "end": {
        const c = this.#incoming.get(m.id);
        this.#incoming.delete(m.id);
        try {
          c?.close();
        } catch { /* cancelled meanwhile */ }
        return;
      }
      case "cancel": {
        const reader = this.#outgoing.get(m.id);
        this.#outgoing.delete(m.id);
        reader?.cancel().catch(() => {});
        return;
      }
    }
  }

  async #answer(m: Asked): Promise<void> {
    const req = new Request(m.url, {
      method: m.method,
      headers: m.headers,
      body: m.body && m.method !== "GET" && m.method !== "HEAD" ? m.body : undefined,
    });
    const res = await this.serve(req); // the handler turns every error into an answer
    const headers = [...res.headers];
    if (!streamed(res) || !res.body) {
      const read = res.body ? await res.arrayBuffer() : null;
      const body = read && read.byteLength ? read : null; // a 204's is none
      const msg: LinkMessage = {
        t: "answer",
        id: m.id,
        status: res.status,
        headers,
        body,
        streamed: false,
      };
      this.port.postMessage(msg, body ? [body] : []);
      return;
    }
    const reader = res.body.getReader();
    this.#outgoing.set(m.id, reader);
    this.port.postMessage(
      { t: "answer", id: m.id, status: res.status, headers, body: null, streamed: true },
    );
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        const data = ownBuffer(value);
        this.port.postMessage({ t: "chunk", id: m.id, data } satisfies LinkMessage, [data]);
      }
    } catch { /* cancelled: the asker's client left */ }
    if (this.#outgoing.delete(m.id)) this.port.postMessage({ t: "end", id: m.id });
  }

  #answered(m: Extract<LinkMessage, { t: "answer" }>): void {
    const resolve = this.#waiting.get(m.id);
    this.#waiting.delete(m.id);
    if (!resolve) return;
    if (!m.streamed) {
      resolve(new Response(m.body, { status: m.status, headers: m.headers }));
      return;
    }
    const body = new ReadableStream<Uint8Array>({
      start: (c) => void this.#incoming.set(m.id, c),
      cancel: () => {
        this.#incoming.delete(m.id);
        this.port.postMessage({ t: "cancel", id: m.id } satisfies LinkMessage);
      },
    });
    resolve(new Response(body, { status: m.status, headers: m.headers }));
  }
}
