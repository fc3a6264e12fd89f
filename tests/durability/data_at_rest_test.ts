/**
 * Data at rest (docs/security.md): a broker started under umask 022 makes its data directory
 * 0700 and every file in it 0600 (WAL files, compacted ones, the lock, node_id, the webhook key,
 * damage it cut out); an existing directory that lets others in is warned about, and the
 * broker's own files an older version left readable are narrowed.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { type ChildBroker, logLines, spawnBroker, stop } from "../_support/child.ts";
import { walPath } from "../_support/files.ts";
import { call, consumeList, tryPublish } from "../_support/http.ts";

/** Compaction as soon as a file holds twice what it needs; debug logs say when it ran. */
const ENV = {
  BROKER_COMPACT_MIN_BYTES: "0",
  BROKER_COMPACT_RATIO: "2",
  BROKER_LOG_LEVEL: "debug",
};

/** Every entry of `dir` with its permission bits, in octal, the directory itself as ".". */
async function modes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = { ".": octal((await Deno.stat(dir)).mode) };
  for await (const e of Deno.readDir(dir)) {
    out[e.name] = octal((await Deno.stat(`${dir}/${e.name}`)).mode);
  }
  return out;
}

function octal(mode: number | null): string {
  return mode === null ? "none" : "0" + (mode & 0o777).toString(8);
}

async function withParent(fn: (parent: string) => Promise<void>): Promise<void> {
  const parent = await Deno.makeTempDir({ prefix: "ferry-at-rest-" });
  try {
    await fn(parent);
  } finally {
    await Deno.remove(parent, { recursive: true }).catch(() => {});
  }
}

/** Publishes `n` messages to `topic` and takes them all with auto_ack, so compaction is due. */
async function churn(child: ChildBroker, topic: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    assertEquals((await tryPublish(child.url, topic, `m${i}`)).status, 201);
  }
  const taken = await consumeList(child.url, topic, `limit=${n}&auto_ack=true`);
  assertEquals(taken.length, n);
}

Deno.test({
  name: "data dir: under umask 022 the directory is 0700 and every file in it 0600",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withParent(async (parent) => {
      const dir = `${parent}/data`;
      let child = await spawnBroker({ dataDir: dir, env: ENV, umask: "022" });
      try {
        const reg = await call(child, "POST", "/webhook/signed", {
          json: { url: "http://127.0.0.1:9/hook", secret: "whsec-modes" },
        });
        assertEquals(reg.status, 201, reg.text);
        await churn(child, "jobs", 50);
        await child.logged("compacted"); // jobs.wal is now the renamed compaction file
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      // A torn record at the end of a WAL file: start-up keeps it in `jobs.wal.cut-<ms>`.
      const f = await Deno.open(walPath(dir, "jobs"), { append: true });
      await f.write(new Uint8Array([200, 0, 0, 0, 1, 2, 3, 4, 5]));
      f.close();
      child = await spawnBroker({ dataDir: dir, env: ENV, umask: "022" });
      try {
        await child.logged("WAL tail cut off");
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      const seen = await modes(dir);
      assert(Object.keys(seen).some((n) => n.startsWith("jobs.wal.cut-")), JSON.stringify(seen));
      for (const name of ["ferry.lock", "node_id", "jobs.wal", "signed.wal"]) {
        assert(name in seen, `${name} missing: ${JSON.stringify(seen)}`);
      }
      const expected = Object.fromEntries(
        Object.keys(seen).map((n) => [n, n === "." ? "0700" : "0600"]),
      );
      assertEquals(seen, expected);
    }),
});

Deno.test({
  name: "data dir: a directory others may read is warned about, and old 0644 files narrowed",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withParent(async (parent) => {
      const dir = `${parent}/data`;
      let child = await spawnBroker({ dataDir: dir, umask: "022" });
      try {
        assertEquals((await tryPublish(child.url, "old", "kept")).status, 201);
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      // As a broker before modes were set left them, with an operator's notes beside them.
      await Deno.chmod(dir, 0o755);
      await Deno.chmod(walPath(dir, "old"), 0o644);
      await Deno.chmod(`${dir}/node_id`, 0o644);
      await Deno.writeTextFile(`${dir}/README.txt`, "ours\n", { mode: 0o644 });
      await Deno.chmod(`${dir}/README.txt`, 0o644);
      child = await spawnBroker({ dataDir: dir, umask: "022" });
      try {
        const warned = logLines(child).find((l) =>
          l.msg === "data directory is readable by other users"
        );
        assert(warned, child.logs.join("\n"));
        assertEquals([warned.mode, warned.fix], ["0755", `chmod 700 ${dir}`]);
        assertEquals((await consumeList(child.url, "old", "peek=true")).length, 1);
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      const seen = await modes(dir);
      assertEquals(
        [seen["."], seen["old.wal"], seen["node_id"], seen["README.txt"]],
        ["0755", "0600", "0600", "0644"],
        "the directory keeps its mode, the broker's files are narrowed, others are left alone",
      );
    }),
});
