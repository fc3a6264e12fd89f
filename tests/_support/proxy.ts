/**
 * Test support: a TCP forwarder on a loopback port in front of a broker, so a client test can
 * cut every connection (a network failure), refuse new ones while a broker restarts, and point
 * the same address at the restarted broker. Bytes pass unchanged in both directions.
 */

/** A forwarder: the client uses `url`; `target` is where its connections go. */
export interface Proxy {
  url: string;
  /** The broker's base URL connections are forwarded to (may change between connections). */
  target: string;
  /** While true, new connections are closed as soon as they arrive. */
  down: boolean;
  /**
   * The next this many connections carry the request to the broker, then close as soon as its
   * answer starts: the broker acted, the client never hears it.
   */
  loseAnswers: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Closes every open connection, both sides. */
  cut(): void;
  close(): Promise<void>;
}

/** Starts a forwarder to `target` on 127.0.0.1:0. */
export function startProxy(target: string): Proxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const piping = new Set<Promise<unknown>>();
  let accepted = 0;
  const drop = (c: Deno.Conn) => {
    open.delete(c);
    try {
      c.close();
    } catch { /* closed already */ }
  };
  const serve = async (client: Deno.Conn) => {
    accepted++;
    if (proxy.down) return drop(client);
    open.add(client);
    let upstream: Deno.Conn;
    try {
      const { hostname, port } = new URL(proxy.target);
      upstream = await Deno.connect({ hostname, port: Number(port) });
    } catch {
      return drop(client);
    }
    open.add(upstream);
    const lose = proxy.loseAnswers > 0;
    if (lose) proxy.loseAnswers--;
    const pipes = [
      client.readable.pipeTo(upstream.writable),
      lose
        ? upstream.readable.getReader().read().then(() => {})
        : upstream.readable.pipeTo(client.writable),
    ];
    // One side ending ends the pair: HTTP clients and servers do not half-close.
    const done = Promise.race(pipes).catch(() => {}).finally(() => {
      drop(client);
      drop(upstream);
    });
    const settled = Promise.allSettled([done, ...pipes]);
    piping.add(settled);
    settled.finally(() => piping.delete(settled));
  };
  const accepting = (async () => {
    try {
      for await (const c of listener) serve(c);
    } catch { /* listener closed */ }
  })();
  const proxy: Proxy = {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    target,
    down: false,
    loseAnswers: 0,
    get accepted() {
      return accepted;
    },
    cut() {
      for (const c of [...open]) drop(c);
    },
    async close() {
      listener.close();
      await accepting;
      for (const c of [...open]) drop(c);
      await Promise.all([...piping]);
    },
  };
  return proxy;
}
