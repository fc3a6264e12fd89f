/**
 * Test support: a throwaway certificate authority and certificates made with `openssl` at test
 * time (no key is ever committed), in a temp dir the caller removes.
 */

/** A CA and a server certificate it signed, as files and as PEM text. */
export interface TestPki {
  dir: string;
  /** The CA's certificate (PEM): what clients trust. */
  caFile: string;
  ca: string;
  /** The server's certificate and key files, for BROKER_TLS_CERT and BROKER_TLS_KEY. */
  certFile: string;
  keyFile: string;
  /** A client certificate the CA signed (for etcd's client-cert-auth), and its key. */
  clientCertFile: string;
  clientKeyFile: string;
  /** Removes every file. */
  remove(): Promise<void>;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(`openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/** `<name>.key` and `<name>.pem`: a new key and a certificate for it that `ca.pem` signed. */
async function signed(dir: string, name: string, cn: string, extensions: string): Promise<void> {
  await openssl(dir, [
    "req",
    ...EC,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    `/CN=${cn}`,
  ]);
  await Deno.writeTextFile(`${dir}/${name}.cnf`, `basicConstraints=CA:FALSE\n${extensions}\n`);
  await openssl(dir, [
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-out",
    `${name}.pem`,
    "-extfile",
    `${name}.cnf`,
  ]);
}

/**
 * A new CA, a certificate it signed for `names` (DNS names and IP addresses; by default
 * localhost and 127.0.0.1) for servers (and clients too: etcd's own gateway presents it to etcd
 * under --client-cert-auth), and a client certificate; valid for two days. `dir` holds them (a
 * new temp dir by default).
 */
export async function makePki(
  names: string[] = ["localhost", "127.0.0.1"],
  dir?: string,
): Promise<TestPki> {
  dir ??= await Deno.makeTempDir({ prefix: "ferry-pki-" });
  await openssl(dir, [
    "req",
    "-x509",
    ...EC,
    "-days",
    "2",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-subj",
    "/CN=Ferry test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  const san = names.map((n) => /^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`).join(",");
  await signed(
    dir,
    "server",
    "ferry",
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth`,
  );
  await signed(dir, "client", "ferry-node", "extendedKeyUsage=clientAuth");
  const d = dir;
  return {
    clientCertFile: `${d}/client.pem`,
    clientKeyFile: `${d}/client.key`,
    dir: d,
    caFile: `${d}/ca.pem`,
    ca: await Deno.readTextFile(`${d}/ca.pem`),
    certFile: `${d}/server.pem`,
    keyFile: `${d}/server.key`,
    remove: () => Deno.remove(d, { recursive: true }),
  };
}

/** A fetch client that trusts `pki`'s CA (and only what the platform trusts besides). */
export function trusting(pki: Pick<TestPki, "ca">): Deno.HttpClient {
  return Deno.createHttpClient({ caCerts: [pki.ca] });
}
