/**
 * A key as a keys file may hold it without holding the key: `sha256:` and the lowercase hex
 * SHA-256 of its UTF-8 bytes (docs/security.md "Keys at rest"). Dependency-free: the broker
 * and the CLI (`ferry key hash`) share it.
 */

export const HASHED_PREFIX = "sha256:";

/** Bytes as lowercase hex. */
export function hexOf(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The keys-file entry of `key`: `sha256:<hex>`. */
export async function hashedKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return HASHED_PREFIX + hexOf(new Uint8Array(digest));
}
