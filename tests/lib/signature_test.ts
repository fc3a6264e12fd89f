import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { assertEquals, assertThrows } from "../_support/assert.ts";
import {
  ferrySignature,
  hmacKey,
  signatures,
  signingKey,
  standardSignature,
} from "../../lib/webhooks/signature.ts";

const body = new TextEncoder().encode('{"order":42,"note":"naïve"}');

Deno.test("ferrySignature() is the hex HMAC-SHA256 of the body, as node:crypto computes it", () => {
  const expected = createHmac("sha256", "s3cret").update(body).digest("hex");
  assertEquals(ferrySignature(signingKey("s3cret"), body), `sha256=${expected}`);
});

Deno.test("standardSignature() is accepted by the standardwebhooks reference library", () => {
  const secret = `whsec_${btoa("a key of random bytes, 32 long!!")}`;
  const key = signingKey(secret);
  const id = "msg_01938c2e", ts = Math.floor(Date.now() / 1000);
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": standardSignature(key, id, ts, body),
  };
  const text = new TextDecoder().decode(body);
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

Deno.test("signatures() (WebCrypto) gives what ferrySignature() and standardSignature() give", async () => {
  const secret = `whsec_${btoa("a key of random bytes, 32 long!!")}`;
  const got = await signatures(await hmacKey(secret), "msg_1", 1_732_300_000, body);
  const key = signingKey(secret);
  assertEquals(got, {
    ferry: ferrySignature(key, body),
    standard: standardSignature(key, "msg_1", 1_732_300_000, body),
  });
});
