/**
 * @module The link between two workers of one broker (BROKER_WORKERS, docs/architecture.md
 * "Workers"): a MessagePort that carries HTTP requests one way and their answers back. A body
 * crosses as a transferred ArrayBuffer, moved and not copied; an event stream's body crosses as
 * chunks until it ends, or until the asker's reader cancels it (the client left), which cancels
 * the answering worker's stream too. Either end can ask: each side answers with `serve`.
 *
 * What one turn of the event loop sends crosses as one message: waking the other worker's thread
 * costs far more than the data (a lone round trip measured 120 µs of CPU on these machines, against
 * 11 µs each when 64 crossed together), and under load many requests arrive in one turn.
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

/** A broker verb asked of the other worker (lib/remote_broker.ts), its arguments cloned. */
interface Called {
  t: "call";
  id: number;
  verb: string;
  args: unknown[];
}

/** A refusal as it crosses: enough to throw the same BrokerError on the other side. */
export interface CallError {
  name: string;
  message: string;
  code?: string;
  retryAfterSeconds?: number;
}

/** What crosses a link. */
type LinkMessage =
  | Asked
  | Called
  | { t: "result"; id: number; value?: unknown; error?: CallError }
  | { t: "abort"; id: number }
  | { t: "event"; sub: number; data: unknown }
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
  /** What this turn sends, and the buffers it gives away. */
  #outbox: LinkMessage[] = [];
  #transfer: ArrayBuffer[] = [];

  /** Calls waiting for their result, by id. */
  readonly #calls = new Map<number, { resolve(v: unknown): void; reject(e: CallError): void }>();
  /** Calls being answered here, by the other end's id: aborted when its client leaves. */
  readonly #answering = new Map<number, AbortController>();

  constructor(
    readonly port: MessagePort,
    /** Answers what the other end asks: this worker's handler, for a request it owns. */
    readonly serve: (req: Request) => Promise<Response>,
    /**
     * Runs a broker verb the other end calls; what it returns must be cloneable. A verb that
     * subscribes sends its events back with `emit` on this link.
     */
    readonly answer: (
      verb: string,
      args: unknown[],
      signal: AbortSignal,
    ) => Promise<unknown> = () => Promise.reject(new Error("this link answers no calls")),
  ) {
    port.onmessage = (e: MessageEvent<LinkMessage[]>) => {
      for (const m of e.data) this.#received(m);
    };
  }

  /** Queues `m` for the end of this turn, when everything queued crosses as one message. */
  #post(m: LinkMessage, buffer?: ArrayBuffer | null): void {
    if (this.#outbox.length === 0) setImmediate(() => this.#flush());
    this.#outbox.push(m);
    if (buffer) this.#transfer.push(buffer);
  }

  #flush(): void {
    const out = this.#outbox, transfer = this.#transfer;
    this.#outbox = [];
    this.#transfer = [];
    try {
      this.port.postMessage(out, transfer);
    } catch (e) {
      // One message that cannot cross must not take the others with it: send each alone, copied.
      console.error(`worker link: a batch could not be sent (${(e as Error).message})`);
      for (const m of out) {
        try {
          this.port.postMessage([m]);
        } catch { /* that one is lost; its asker waits */ }
      }
    }
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
      this.#post(msg, buffer);
    });
  }

  /**
   * Calls a broker verb on the worker at the other end; the arguments are cloned, not shared.
   * Rejects with the CallError the verb threw there. `signal` aborting aborts it there too.
   */
  call(verb: string, args: unknown[], signal?: AbortSignal): Promise<unknown> {
    const id = ++this.#next;
    return new Promise((resolve, reject) => {
      this.#calls.set(id, { resolve, reject });
      this.#post({ t: "call", id, verb, args });
      signal?.addEventListener("abort", () => {
        if (this.#calls.has(id)) this.#post({ t: "abort", id });
      }, { once: true });
    });
  }

  /** Event handlers of subscriptions this side asked for, by id. */
  readonly #listeners = new Map<number, (data: unknown) => void>();

  /** A new subscription id, whose events (the other side's `emit`) go to `fn`. */
  listen(fn: (data: unknown) => void): number {
    const id = ++this.#next;
    this.#listeners.set(id, fn);
    return id;
  }

  /** Stops hearing subscription `id`. */
  unlisten(id: number): void {
    this.#listeners.delete(id);
  }

  /** Sends `data` to the other side's subscription `sub` (cloned; sent in order). */
  emit(sub: number, data: unknown): void {
    this.#post({ t: "event", sub, data });
  }

  close(): void {
    this.port.close();
  }

  async #called(m: Called): Promise<void> {
    const ctl = new AbortController();
    this.#answering.set(m.id, ctl);
    try {
      const value = await this.answer(m.verb, m.args, ctl.signal);
      this.#post({ t: "result", id: m.id, value });
    } catch (e) {
      const err = e as Error & { code?: string; retryAfterSeconds?: number };
      const error: CallError = { name: err.name, message: err.message };
      if (err.code !== undefined) error.code = err.code;
      if (err.retryAfterSeconds !== undefined) error.retryAfterSeconds = err.retryAfterSeconds;
      this.#post({ t: "result", id: m.id, error });
    } finally {
      this.#answering.delete(m.id);
    }
  }

  #received(m: LinkMessage): void {
    switch (m.t) {
      case "call":
        return void this.#called(m);
      case "result": {
        const c = this.#calls.get(m.id);
        this.#calls.delete(m.id);
        if (m.error) c?.reject(m.error);
        else c?.resolve(m.value);
        return;
      }
      case "abort":
        return this.#answering.get(m.id)?.abort();
      case "event":
        return this.#listeners.get(m.sub)?.(m.data);
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
    let res: Response;
    try {
      const req = new Request(m.url, {
        method: m.method,
        headers: m.headers,
        body: m.body && m.method !== "GET" && m.method !== "HEAD" ? m.body : undefined,
      });
      res = await this.serve(req); // the handler turns every error into an answer
    } catch (e) {
      // What cannot even be rebuilt here is answered, never left to end the worker.
      res = new Response(`Cannot hand the request over: ${(e as Error).message}`, { status: 500 });
    }
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
      this.#post(msg, body);
      return;
    }
    const reader = res.body.getReader();
    this.#outgoing.set(m.id, reader);
    this.#post({ t: "answer", id: m.id, status: res.status, headers, body: null, streamed: true });
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        // A copy: a stream may enqueue bytes it sends again (a cached event, a ping), which a
        // transfer would leave detached for the next reader.
        const data = value.slice().buffer as ArrayBuffer;
        this.#post({ t: "chunk", id: m.id, data }, data);
      }
    } catch { /* cancelled: the asker's client left */ }
    if (this.#outgoing.delete(m.id)) this.#post({ t: "end", id: m.id });
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
        this.#post({ t: "cancel", id: m.id });
      },
    });
    resolve(new Response(body, { status: m.status, headers: m.headers }));
  }
}
