/**
 * Test support: an in-process broker behind a TCP proxy, restartable on its data dir while the
 * client keeps the same address: what a client sees when its broker restarts (a rolling restart,
 * a crash and recovery), with the old broker's sockets closed and new ones refused meanwhile.
 */

import { type Proxy, startProxy } from "./proxy.ts";
import { type InProcessBroker, startBroker } from "./server.ts";

/** A broker reached through `url`, which outlives restarts. */
export interface Restartable {
  /** The proxy's address: give this to clients. */
  url: string;
  proxy: Proxy;
  /** The broker running now. */
  broker: InProcessBroker;
  /**
   * Stops the broker (its connections cut, new ones refused), then opens a new one on the same
   * data dir behind the same address. `beforeClose` runs once the old broker is unreachable to
   * clients but still up; `afterClose` once it is gone.
   */
  restart(hooks?: {
    beforeClose?: (old: InProcessBroker) => Promise<void>;
    afterClose?: () => Promise<void>;
  }): Promise<void>;
  /** Closes the proxy and the broker, and removes the data dir. */
  close(): Promise<void>;
}

/** Starts a broker on the real clock behind a proxy. */
export async function startRestartable(): Promise<Restartable> {
  const first = await startBroker();
  const proxy = startProxy(first.url);
  const dataDir = first.dataDir;
  let running: InProcessBroker | undefined = first;
  const r: Restartable = {
    url: proxy.url,
    proxy,
    get broker() {
      if (!running) throw new Error("no broker is running: a restart failed");
      return running;
    },
    async restart(hooks = {}) {
      const old = r.broker;
      proxy.down = true;
      proxy.cut();
      await hooks.beforeClose?.(old);
      running = undefined;
      await old.close({ keepData: true });
      await hooks.afterClose?.();
      running = await startBroker({ dataDir });
      proxy.target = running.url;
      proxy.down = false;
    },
    async close() {
      await proxy.close();
      if (running) await running.close();
      else await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    },
  };
  return r;
}
