/**
 * The floor of start-up replay for `tests/bench/load.ts` (section 6): how fast this process reads
 * the `*.wal` files of a data dir when nothing is applied, so the broker's replay rate prints
 * beside what the WAL format and its decoder allow at all.
 *
 * Two passes over the same files, each reading them whole in 8 MiB chunks:
 * - `checked`: each frame's length and CRC-32, as replay checks them (`checksumOk`);
 * - `decoded`: lib/storage/replay.ts's own replayFile, which also decodes each record (its id and
 *   strings, a view of its payload), with an apply that only counts.
 *
 * `deno run --allow-read --allow-write tests/bench/replay_floor.ts DIR` prints one JSON line:
 * `{"records","bytes","checked_ms","decoded_ms"}`. Run it with the broker's V8 flags, on a WAL
 * without damage (replayFile would salvage it, which needs write access).
 */

import { Logger } from "../../lib/log.ts";
import { replayFile } from "../../lib/storage/replay.ts";
import { checksumOk, FILE_HEADER_BYTES, FRAME_HEADER_BYTES } from "../../lib/storage/record.ts";

const CHUNK_BYTES = 8 * 1024 * 1024;

/** Walks the frames of one file, checking each checksum; returns how many it read. */
function checkFile(path: string): number {
  const file = Deno.openSync(path, { read: true });
  try {
    let buf = new Uint8Array(CHUNK_BYTES);
    let view = new DataView(buf.buffer);
    let len = 0; // bytes of buf in use
    let at = 0; // where the next frame starts in buf
    let records = 0;
    let skip = FILE_HEADER_BYTES;
    for (;;) {
      // Keep the unread rest at the front and fill behind it.
      buf.copyWithin(0, at, len);
      len -= at;
      at = 0;
      const r = file.readSync(buf.subarray(len));
      if (r === null) return records;
      len += r;
      if (skip) {
        at = skip;
        skip = 0;
      }
      while (at + FRAME_HEADER_BYTES <= len) {
        const n = view.getUint32(at, true);
        const end = at + FRAME_HEADER_BYTES + n;
        if (end > buf.length) {
          const bigger = new Uint8Array(end - at + CHUNK_BYTES);
          bigger.set(buf.subarray(at, len));
          len -= at;
          at = 0;
          buf = bigger;
          view = new DataView(buf.buffer);
          break;
        }
        if (end > len) break;
        const body = buf.subarray(at + FRAME_HEADER_BYTES, end);
        if (!checksumOk(view.getUint32(at + 4, true), body)) {
          throw new Error(`${path}: damaged frame`);
        }
        records++;
        at = end;
      }
    }
  } finally {
    file.close();
  }
}

const dir = Deno.args[0];
if (!dir) {
  console.error("usage: replay_floor.ts DIR");
  Deno.exit(2);
}
const paths = [...Deno.readDirSync(dir)].filter((e) => e.isFile && e.name.endsWith(".wal"))
  .map((e) => `${dir}/${e.name}`);
const bytes = paths.reduce((n, p) => n + Deno.statSync(p).size, 0);

let t0 = performance.now();
let checked = 0;
for (const p of paths) checked += checkFile(p);
const checkedMs = performance.now() - t0;

const log = new Logger("error", () => {});
t0 = performance.now();
let decoded = 0;
for (const p of paths) await replayFile(p, () => void decoded++, log);
const decodedMs = performance.now() - t0;

if (checked !== decoded) throw new Error(`checked ${checked} records but decoded ${decoded}`);
console.log(
  JSON.stringify({ records: decoded, bytes, checked_ms: checkedMs, decoded_ms: decodedMs }),
);
