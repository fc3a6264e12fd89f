/**
 * A bare HTTP/1.1 keep-alive connection for the bench's clients (tests/bench/e2e_client.ts):
 * requests written as bytes, responses read by Content-Length. `fetch` cost the e2e consumer
 * about a millisecond a poll with the publisher on the same two cores, so with `limit=1` the
 * client, not the server, fell behind 2,000 msg/s (the durable queue ceiling too).
 *
 * Responses may be pipelined: `send()` writes a request without waiting, `next()` reads the
 * oldest answer not yet read. Only what the broker and tests/bench/ceiling_queue.ts answer is
 * understood: a status line, headers and a Content-Length body (no chunked bodies).
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const CRLFCRLF = [13, 10, 13, 10];

export interface RawResponse {
  status: number;
  body: Uint8Array;
}

export class RawHttp {
  #buf = new Uint8Array(256 * 1024);
  #start = 0;
  #end = 0;
  #writing: Promise<unknown> = Promise.resolve();

  private constructor(private readonly conn: Deno.TcpConn, private readonly host: string) {}

  static async open(url: string): Promise<RawHttp> {
    const { hostname, port } = new URL(url);
    const conn = await Deno.connect({ hostname, port: Number(port) });
    conn.setNoDelay(true);
    return new RawHttp(conn, `${hostname}:${port}`);
  }

  /** Writes one request; writes go out in call order. */
  send(method: string, path: string, body?: string, contentType?: string): Promise<void> {
    const bytes = body === undefined ? undefined : encoder.encode(body);
    const head = `${method} ${path} HTTP/1.1\r\nHost: ${this.host}\r\n` +
      (contentType ? `Content-Type: ${contentType}\r\n` : "") +
      `Content-Length: ${bytes?.length ?? 0}\r\n\r\n`;
    const h = encoder.encode(head);
    const all = new Uint8Array(h.length + (bytes?.length ?? 0));
    all.set(h);
    if (bytes) all.set(bytes, h.length);
    const done = this.#writing.then(() => this.#writeAll(all));
    this.#writing = done.catch(() => {});
    return done;
  }

  /** One request and its answer, on a connection nothing else is using. */
  async request(
    method: string,
    path: string,
    body?: string,
    contentType?: string,
  ): Promise<RawResponse> {
    await this.send(method, path, body, contentType);
    return this.next();
  }

  /** The next response on the connection. */
  async next(): Promise<RawResponse> {
    let headEnd = this.#find(CRLFCRLF);
    while (headEnd < 0) {
      await this.#fill();
      headEnd = this.#find(CRLFCRLF);
    }
    const head = decoder.decode(this.#buf.subarray(this.#start, headEnd));
    const status = Number(head.slice(9, 12));
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!m && /\r\ntransfer-encoding:/i.test(head)) throw new Error("chunked answers are not read");
    const length = m ? Number(m[1]) : 0;
    // Offsets from the first unread byte: a fill may move the unread bytes to the buffer's start.
    const bodyAt = headEnd + 4 - this.#start;
    while (this.#end - this.#start < bodyAt + length) await this.#fill(bodyAt + length);
    const from = this.#start + bodyAt;
    const body = this.#buf.slice(from, from + length);
    this.#start = from + length;
    return { status, body };
  }

  close(): void {
    try {
      this.conn.close();
    } catch { /* closed */ }
  }

  async #writeAll(bytes: Uint8Array): Promise<void> {
    for (let at = 0; at < bytes.length;) at += await this.conn.write(bytes.subarray(at));
  }

  /** Index of `pattern` in the unread bytes (absolute in #buf), or -1. */
  #find(pattern: number[]): number {
    const b = this.#buf;
    outer: for (let i = this.#start; i + pattern.length <= this.#end; i++) {
      for (let k = 0; k < pattern.length; k++) if (b[i + k] !== pattern[k]) continue outer;
      return i;
    }
    return -1;
  }

  /** Reads more bytes, with room for `need` unread bytes (moving or growing the buffer). */
  async #fill(need = 0): Promise<void> {
    if (
      this.#start > 0 && (this.#end === this.#buf.length || this.#start + need > this.#buf.length)
    ) {
      this.#buf.copyWithin(0, this.#start, this.#end);
      this.#end -= this.#start;
      this.#start = 0;
    }
    if (need > this.#buf.length || this.#end === this.#buf.length) {
      const grown = new Uint8Array(Math.max(need, this.#buf.length * 2));
      grown.set(this.#buf.subarray(0, this.#end));
      this.#buf = grown;
    }
    const n = await this.conn.read(this.#buf.subarray(this.#end));
    if (n === null) throw new Error("connection closed");
    this.#end += n;
  }
}
