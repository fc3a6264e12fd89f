/**
 * @module A node's identity: a UUID kept in `<data dir>/node_id`, so a node keeps its id across
 * restarts. With `:memory:` there is nothing to keep it in, and each process gets a new one.
 */

import { FILE_MODE } from "./storage/data_dir_modes.ts";

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The node id stored in `dir`, created on first start (written to a temp file, then renamed). */
export async function loadNodeId(dir: string): Promise<string> {
  if (dir === ":memory:") return crypto.randomUUID();
  const path = `${dir}/node_id`;
  try {
    const id = (await Deno.readTextFile(path)).trim();
    if (ID.test(id)) return id;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const id = crypto.randomUUID();
  await Deno.writeTextFile(`${path}.tmp`, id + "\n", { mode: FILE_MODE });
  await Deno.rename(`${path}.tmp`, path);
  return id;
}
