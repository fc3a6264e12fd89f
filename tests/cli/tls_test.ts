/**
 * `ferry` against an HTTPS broker whose certificate a private CA signed: `--cacert` (or
 * FERRY_CACERT) trusts it; without it the command cannot connect; an unreadable CA file is a
 * usage error.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { ferry } from "../_support/cli.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import { makePki } from "../_support/tls.ts";

Deno.test("ferry --cacert publishes and consumes over HTTPS; without the CA it cannot connect", async () => {
  const pki = await makePki();
  try {
    await withDataDir(async (dir) => {
      const b = await start(dir, { BROKER_TLS_CERT: pki.certFile, BROKER_TLS_KEY: pki.keyFile });
      const url = b.url.replace("http:", "https:");
      const pub = await ferry(["--cacert", pki.caFile, "publish", "secure", "over tls"], { url });
      assertEquals(pub.code, 0, pub.stderr);
      const got = await ferry(["--json", "consume", "secure"], {
        url,
        env: { FERRY_CACERT: pki.caFile },
      });
      assertEquals(got.code, 0, got.stderr);
      assertEquals(JSON.parse(got.stdout)[0].payload_text, "over tls");
      const refused = await ferry(["health"], { url });
      assertEquals(refused.code, 3, "no CA: the certificate is not trusted");
      const missing = await ferry(["--cacert", `${pki.dir}/nope.pem`, "health"], { url });
      assertEquals(missing.code, 2, missing.stderr);
      assert(missing.stderr.includes("Cannot read --cacert"), missing.stderr);
      await stop(b, "SIGTERM");
    });
  } finally {
    await pki.remove();
  }
});
