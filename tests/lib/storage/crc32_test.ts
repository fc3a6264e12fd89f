import { crc32 as zlibCrc32 } from "node:zlib";
import { assertEquals } from "../../_support/assert.ts";
import { crc32 } from "../../../lib/storage/crc32.ts";

Deno.test("crc32() gives the check value of CRC-32/ISO-HDLC", () => {
  assertEquals(crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
  assertEquals(crc32(new Uint8Array(0)), 0);
});

Deno.test("crc32() equals node:zlib's on every length 0-100 and on large random buffers", () => {
  const bytes = new Uint8Array(70_000);
  for (let at = 0; at < bytes.length; at += 65_536) {
    crypto.getRandomValues(bytes.subarray(at, at + 65_536));
  }
  for (let n = 0; n <= 100; n++) {
    assertEquals(crc32(bytes.subarray(0, n)), zlibCrc32(bytes.subarray(0, n)), `length ${n}`);
  }
  // unaligned views and lengths that leave every remainder of the 8-byte loop
  for (const [from, to] of [[1, 1031], [3, 4099], [7, 65_543], [0, 70_000]]) {
    const view = bytes.subarray(from, to);
    assertEquals(crc32(view), zlibCrc32(view), `bytes ${from}-${to}`);
  }
});
