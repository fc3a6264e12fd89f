/**
 * @module Webhook signatures (docs/api/webhooks.md): `X-Ferry-Signature: sha256=<hex HMAC-SHA256
 * of the body>` and the Standard Webhooks `webhook-signature: v1,<base64 HMAC of
 * "id.timestamp.body">`, both keyed by the webhook's secret: its UTF-8 bytes, or for a secret
 * written `whsec_<base64>` (the Standard Webhooks form) the decoded bytes.
 */

const STANDARD_PREFIX = "whsec_";

/** The HMAC key of a secret. */
export function signingKey(secret: string): Uint8Array {
  if (secret.startsWith(STANDARD_PREFIX)) {
    try {
      return Uint8Array.fromBase64(secret.slice(STANDARD_PREFIX.length));
    } catch { /* not Base64 after all: the whole text is the key */ }
  }
  return new TextEncoder().encode(secret);
}

/** The key of a secret for WebCrypto, which signs off the main thread. */
export function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey(
    "raw",
    signingKey(secret) as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
}

/** Both signature headers' values of one POST, signed with WebCrypto. */
export async function signatures(
  key: CryptoKey,
  id: string,
  timestampSeconds: number,
  body: Uint8Array,
): Promise<{ ferry: string; standard: string }> {
  const prefix = new TextEncoder().encode(`${id}.${timestampSeconds}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  const [ferry, standard] = await Promise.all([
    crypto.subtle.sign("HMAC", key, body as Uint8Array<ArrayBuffer>),
    crypto.subtle.sign("HMAC", key, signed),
  ]);
  return {
    ferry: `sha256=${new Uint8Array(ferry).toHex()}`,
    standard: `v1,${new Uint8Array(standard).toBase64()}`,
  };
}
