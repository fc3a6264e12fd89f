/**
 * Test support: a real etcd (Debian's `etcd-server`, installed by tools/setup_test_deps.sh) on
 * free loopback ports with its own temp data dir; `stop()` kills it and removes the dir unless
 * asked to keep it (to restart the same etcd).
 */

export interface EtcdServer {
  /** `127.0.0.1:port` of its client endpoint. */
  endpoint: string;
  dataDir: string;
  stop(opts?: { keepData?: boolean }): Promise<void>;
}

/** A free TCP port on loopback (listen on 0, read it, close). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * Starts etcd and resolves once it answers a health check. `same` restarts a stopped one on its
 * data dir and client port.
 */
export async function startEtcd(same?: EtcdServer): Promise<EtcdServer> {
  const dataDir = same?.dataDir ?? await Deno.makeTempDir({ prefix: "ferry-etcd-" });
  const client = same?.endpoint ?? `127.0.0.1:${freePort()}`;
  const peer = `127.0.0.1:${freePort()}`;
  const process = new Deno.Command("etcd", {
    args: [
      "--name=test",
      `--data-dir=${dataDir}/etcd`,
      `--listen-client-urls=http://${client}`,
      `--advertise-client-urls=http://${client}`,
      `--listen-peer-urls=http://${peer}`,
      `--initial-advertise-peer-urls=http://${peer}`,
      `--initial-cluster=test=http://${peer}`,
      "--log-level=error",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const exited = process.status;
  let up = false;
  for (let i = 0; i < 200 && !up; i++) {
    const gone = await Promise.race([exited.then(() => true), Promise.resolve(false)]);
    if (gone) throw new Error("etcd exited at start-up");
    try {
      const res = await fetch(`http://${client}/health`, { signal: AbortSignal.timeout(500) });
      up = res.ok && (await res.json()).health === "true";
    } catch { /* not yet */ }
    if (!up) await new Promise((r) => setTimeout(r, 50));
  }
  if (!up) {
    process.kill("SIGKILL");
    throw new Error("etcd did not become healthy within 10 s");
  }
  return {
    endpoint: client,
    dataDir,
    async stop(opts = {}) {
      try {
        process.kill("SIGKILL");
      } catch { /* gone */ }
      await exited;
      if (!opts.keepData) await Deno.remove(dataDir, { recursive: true });
    },
  };
}
