/**
 * Test support: a real etcd (Debian's `etcd-server`, installed by tools/setup_test_deps.sh) on
 * free loopback ports with its own temp data dir; `stop()` kills it and removes the dir unless
 * asked to keep it (to restart the same etcd).
 */

export interface EtcdServer {
  /** `127.0.0.1:port` of its client endpoint (`https://127.0.0.1:port` when it serves TLS). */
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

/** What an etcd over TLS serves and asks for: its certificate, and clients' certificates. */
export interface EtcdTls {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** A client certificate of the same CA, for the health check. */
  clientCertFile: string;
  clientKeyFile: string;
}

/**
 * Starts etcd and resolves once it answers a health check. `same` restarts a stopped one on its
 * data dir and client port. With `tls`, clients must speak TLS and present a certificate the CA
 * signed (`--client-cert-auth`).
 */
export async function startEtcd(same?: EtcdServer, tls?: EtcdTls): Promise<EtcdServer> {
  const dataDir = same?.dataDir ?? await Deno.makeTempDir({ prefix: "ferry-etcd-" });
  const client = same?.endpoint.replace(/^https:\/\//, "") ?? `127.0.0.1:${freePort()}`;
  const peer = `127.0.0.1:${freePort()}`;
  const scheme = tls ? "https" : "http";
  const tlsArgs = tls
    ? [
      `--cert-file=${tls.certFile}`,
      `--key-file=${tls.keyFile}`,
      `--trusted-ca-file=${tls.caFile}`,
      "--client-cert-auth",
    ]
    : [];
  const health = tls
    ? Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(tls.caFile)],
      cert: await Deno.readTextFile(tls.clientCertFile),
      key: await Deno.readTextFile(tls.clientKeyFile),
    })
    : undefined;
  const process = new Deno.Command("etcd", {
    args: [
      "--name=test",
      `--data-dir=${dataDir}/etcd`,
      `--listen-client-urls=${scheme}://${client}`,
      `--advertise-client-urls=${scheme}://${client}`,
      ...tlsArgs,
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
      const res = await fetch(`${scheme}://${client}/health`, {
        signal: AbortSignal.timeout(500),
        client: health,
      });
      up = res.ok && (await res.json()).health === "true";
    } catch { /* not yet */ }
    if (!up) await new Promise((r) => setTimeout(r, 50));
  }
  health?.close();
  if (!up) {
    process.kill("SIGKILL");
    throw new Error("etcd did not become healthy within 10 s");
  }
  return {
    endpoint: tls ? `https://${client}` : client,
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
