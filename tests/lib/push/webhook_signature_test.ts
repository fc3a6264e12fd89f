import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { assertEquals, assertThrows } from "../../_support/assert.ts";
import { hmacKey, signatures, signingKey } from "../../../lib/push/webhook_signature.ts";
import vectors from "../../_support/webhook_vectors.json" with { type: "json" };

const body = new TextEncoder().encode('{"order":42,"note":"naïve"}');
const text = new TextDecoder().decode(body);

Deno.test("signatures() gives the hex HMAC-SHA256 of the body, as node:crypto computes it", async () => {
  const expected = createHmac("sha256", "s3cret").update(body).digest("hex");
  const { ferry } = await signatures(await hmacKey("s3cret"), "msg_1", 1, body);
  assertEquals(ferry, `sha256=${expected}`);
});

Deno.test("signatures() signs webhook-signature as the standardwebhooks library verifies", async () => {
  const secret = `whsec_${btoa("a key of random bytes, 32 long!!")}`;
  const id = "msg_01938c2e", ts = Math.floor(Date.now() / 1000);
  const { standard } = await signatures(await hmacKey(secret), id, ts, body);
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": standard,
  };
  assertEquals(new Webhook(secret).verify(text, headers), JSON.parse(text));
  // A changed body, id or timestamp fails verification.
  assertThrows(() => new Webhook(secret).verify(text + " ", headers));
  assertThrows(() => new Webhook(secret).verify(text, { ...headers, "webhook-id": "other" }));
});

Deno.test("signingKey() decodes whsec_ secrets and takes any other secret as UTF-8", () => {
  assertEquals(signingKey(`whsec_${btoa("raw")}`), new TextEncoder().encode("raw"));
  assertEquals(signingKey("plain ü"), new TextEncoder().encode("plain ü"));
  assertEquals(signingKey("whsec_***"), new TextEncoder().encode("whsec_***"), "not Base64");
});

Deno.test("signatures() matches the shared vectors the Go client's VerifyWebhook checks", async () => {
  // tests/_support/webhook_vectors.json: one set of vectors for the signer and every verifier.
  for (const v of vectors.vectors) {
    const body = new TextEncoder().encode(v.body);
    const got = await signatures(await hmacKey(v.secret), v.id, v.timestamp, body);
    assertEquals(got, { ferry: v.x_ferry_signature, standard: v.webhook_signature }, v.name);
  }
});
