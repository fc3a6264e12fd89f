/**
 * @module Payload memory. Small payloads are copied into shared 1 MiB slabs instead of each
 * owning an ArrayBuffer: V8 tracks every ArrayBuffer's backing store, and 100,000 of them made
 * publish ~25 % slower (GC) and cost 1.83× the payload bytes in RSS; slab views cost ~1.46×.
 * The price: a slab is freed only when every message in it is gone, so one long-lived message
 * keeps its whole slab (at most 1 MiB) alive.
 */

/** Bytes per slab. */
export const SLAB_BYTES = 1024 * 1024;
/** Payloads larger than this get a buffer of their own. */
export const SLAB_MAX_PAYLOAD_BYTES = 64 * 1024;

let slab = new Uint8Array(0);
let used = 0;

/** A zeroed region of `n` bytes for a payload that the caller fills and keeps. */
export function allocPayload(n: number): Uint8Array {
  if (n > SLAB_MAX_PAYLOAD_BYTES) return new Uint8Array(n);
  if (used + n > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    used = 0;
  }
  const view = slab.subarray(used, used + n);
  used += n;
  return view;
}

/** A copy of `bytes` in slab memory (replay: the read buffer is reused). */
export function copyPayload(bytes: Uint8Array): Uint8Array {
  const out = allocPayload(bytes.length);
  out.set(bytes);
  return out;
}
