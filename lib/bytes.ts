/** @module Byte buffers joined into one, for a single write (a WAL batch, an SSE chunk). */

/** `parts` back to back in one buffer of `total` bytes; a single part is returned as is. */
export function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}
