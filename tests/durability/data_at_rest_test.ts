/**
 * Data at rest (docs/security.md): a broker started under umask 022 makes its data directory
 * 0700 and every file in it 0600 (WAL files, compacted ones, the lock, node_id, the webhook key,
 * damage it cut out); an existing directory that lets others in is warned about, and the
 * broker's own files an older version left readable are narrowed. Webhook secrets are in no
 * file of the data directory, before or after a restart or a compaction, yet a real receiver
 * still checks each POST's signatures; a record an older broker wrote with a plain secret still
 * replays, and is sealed; a node with another key says why it cannot sign, and sends nothing.
 */

import { createHmac } from "node:crypto";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { assert, assertEquals } from "../_support/assert.ts";
import { type ChildBroker, logLines, spawnBroker, stop } from "../_support/child.ts";
import { walPath } from "../_support/files.ts";
import { call, consumeList, tryPublish } from "../_support/http.ts";
import { crc32 } from "../../lib/storage/crc32.ts";
import { FRAME_HEADER_BYTES } from "../../lib/storage/record.ts";

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

/** Publishes `n` messages (JSON strings "m0"…) to `topic` and takes them all with auto_ack, so compaction is due. */
async function churn(child: ChildBroker, topic: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    assertEquals((await tryPublish(child.url, topic, JSON.stringify(`m${i}`))).status, 201);
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
      // A signed webhook makes webhook.key; its target is a loopback port nothing listens on.
      const env = { ...ENV, BROKER_WEBHOOK_ALLOW: "127.0.0.0/8" };
      let child = await spawnBroker({ dataDir: dir, env, umask: "022" });
      try {
        const reg = await call(child, "POST", "/webhook/signed", {
          json: { url: "http://127.0.0.1:9/hook", secret: "whsec-modes" },
        });
        assertEquals(reg.status, 201, reg.text);
        await churn(child, "jobs", 50); // webhook.key is made at start
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
      for (const name of ["ferry.lock", "node_id", "webhook.key", "jobs.wal", "signed.wal"]) {
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

/**
 * A receiver that checks both signatures of every POST with `secret`, as a user's would (the
 * Standard Webhooks library reads bodies as JSON: the tests publish JSON strings).
 */
function signedReceiver(secret: string) {
  const verified = new Map<string, string>();
  const waiters = new Map<string, () => void>();
  const standard = new StandardWebhook(secret);
  const hmacKey = Uint8Array.fromBase64(secret.slice("whsec_".length));
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = new Uint8Array(await req.arrayBuffer());
    const headers = Object.fromEntries(req.headers);
    let outcome = "signed";
    try {
      standard.verify(new TextDecoder().decode(body), headers);
      const ferry = `sha256=${createHmac("sha256", hmacKey).update(body).digest("hex")}`;
      if (headers["x-ferry-signature"] !== ferry) outcome = "bad x-ferry-signature";
    } catch (e) {
      outcome = `refused: ${(e as Error).message}`;
    }
    const text = new TextDecoder().decode(body);
    verified.set(text, outcome);
    waiters.get(text)?.();
    return new Response(null, { status: outcome === "signed" ? 200 : 401 });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    verified,
    /** How the POST of the JSON string `text` checked out, once it came. */
    received(text: string): Promise<string> {
      const payload = JSON.stringify(text);
      if (verified.has(payload)) return Promise.resolve(verified.get(payload)!);
      return new Promise((res) => waiters.set(payload, () => res(verified.get(payload)!)));
    },
    close: () => server.shutdown(),
  };
}

/** The files of `dir` that hold `needle` (as UTF-8 bytes anywhere in them). */
async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const n = new TextEncoder().encode(needle);
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const bytes = await Deno.readFile(`${dir}/${e.name}`);
    outer: for (let i = 0; i + n.length <= bytes.length; i++) {
      for (let j = 0; j < n.length; j++) if (bytes[i + j] !== n[j]) continue outer;
      out.push(e.name);
      break;
    }
  }
  return out;
}

const SECRET = "whsec_" + new TextEncoder().encode("rest-secret-0123456789ab").toBase64();
/** Receivers on loopback: the tests' own, allowed explicitly. */
const PUSH_ENV = {
  ...ENV,
  BROKER_WEBHOOK_ALLOW: "127.0.0.0/8",
  BROKER_WEBHOOK_RETRY_SCHEDULE: "50ms,50ms",
};

Deno.test({
  name: "webhook secrets: in no data file, across compaction and restart; POSTs still signed",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withParent(async (parent) => {
      const dir = `${parent}/data`;
      const receiver = signedReceiver(SECRET);
      let child = await spawnBroker({ dataDir: dir, env: PUSH_ENV });
      try {
        const reg = await call(child, "POST", "/webhook/signed", {
          json: { url: receiver.url, secret: SECRET },
        });
        assertEquals([reg.status, reg.body.signed], [201, true], reg.text);
        assertEquals((await tryPublish(child.url, "signed", JSON.stringify("before"))).status, 201);
        assertEquals(await receiver.received("before"), "signed");
        await churn(child, "signed", 30);
        await child.logged("compacted"); // signed.wal is the compaction's file now
        for (let i = 0; i < 30; i++) assertEquals(await receiver.received(`m${i}`), "signed");
        assertEquals(await filesHolding(dir, SECRET.slice("whsec_".length)), []);
      } finally {
        assertEquals((await stop(child, "SIGKILL")).code, 137);
      }
      child = await spawnBroker({ dataDir: dir, env: PUSH_ENV });
      try {
        assertEquals(
          (await tryPublish(child.url, "signed", JSON.stringify("after restart"))).status,
          201,
        );
        assertEquals(await receiver.received("after restart"), "signed");
        const hooks = await call(child, "GET", "/api/webhooks?topic=signed");
        assertEquals(hooks.body.map((h: { signed: boolean }) => h.signed), [true]);
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
        await receiver.close();
      }
      assertEquals(await filesHolding(dir, SECRET.slice("whsec_".length)), []);
    }),
});

/**
 * A WEBHOOK frame as e65c5f8 wrote it, byte by byte (lib/storage/record.ts's layout then): type,
 * record version, seq, id, url, the secret plain, createdAt, active, and nothing after.
 */
function oldWebhookFrame(seq: number, url: string, secret: string): Uint8Array {
  const enc = new TextEncoder();
  const parts: number[] = [9, 1];
  const f64 = (v: number) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    parts.push(...b);
  };
  const str = (v: string) => {
    const b = enc.encode(v);
    parts.push(b.length & 0xff, b.length >> 8, ...b);
  };
  f64(seq);
  str("0193a0b1-0000-7000-8000-00000000beef");
  str(url);
  str(secret);
  f64(Date.now());
  parts.push(1);
  const body = new Uint8Array(parts);
  const frame = new Uint8Array(FRAME_HEADER_BYTES + body.length);
  const view = new DataView(frame.buffer);
  view.setUint32(0, body.length, true);
  view.setUint32(4, crc32(body), true);
  frame.set(body, FRAME_HEADER_BYTES);
  return frame;
}

Deno.test({
  name: "webhook secrets: an old record's plain secret replays, signs, and leaves the file",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withParent(async (parent) => {
      const dir = `${parent}/data`;
      const receiver = signedReceiver(SECRET);
      let child = await spawnBroker({ dataDir: dir, env: PUSH_ENV });
      try {
        assertEquals((await tryPublish(child.url, "legacy", JSON.stringify("made"))).status, 201);
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      const f = await Deno.open(walPath(dir, "legacy"), { append: true });
      await f.write(oldWebhookFrame(1_000, receiver.url, SECRET));
      f.close();
      assertEquals(await filesHolding(dir, SECRET.slice("whsec_".length)), ["legacy.wal"]);
      child = await spawnBroker({ dataDir: dir, env: PUSH_ENV });
      try {
        const hooks = await call(child, "GET", "/api/webhooks?topic=legacy");
        assertEquals(hooks.body.map((h: { signed: boolean }) => h.signed), [true]);
        assertEquals(
          (await tryPublish(child.url, "legacy", JSON.stringify("old secret"))).status,
          201,
        );
        assertEquals(await receiver.received("old secret"), "signed");
        assertEquals(await filesHolding(dir, SECRET.slice("whsec_".length)), []);
      } finally {
        assertEquals((await stop(child, "SIGKILL")).code, 137);
      }
      child = await spawnBroker({ dataDir: dir, env: PUSH_ENV });
      try {
        assertEquals(
          (await tryPublish(child.url, "legacy", JSON.stringify("sealed since"))).status,
          201,
        );
        assertEquals(await receiver.received("sealed since"), "signed");
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
        await receiver.close();
      }
    }),
});

Deno.test({
  name: "webhook secrets: a node with another key says so and sends nothing unsigned",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withParent(async (parent) => {
      const dir = `${parent}/data`;
      const keyA = `${parent}/a.key`;
      const keyB = `${parent}/b.key`;
      for (const k of [keyA, keyB]) {
        const raw = crypto.getRandomValues(new Uint8Array(32)).toBase64();
        await Deno.writeTextFile(k, raw + "\n", { mode: 0o600 });
      }
      const receiver = signedReceiver(SECRET);
      let child = await spawnBroker({
        dataDir: dir,
        env: { ...PUSH_ENV, BROKER_WEBHOOK_KEY_FILE: keyA },
      });
      let id: string;
      try {
        const reg = await call(child, "POST", "/webhook/moved", {
          json: { url: receiver.url, secret: SECRET },
        });
        assertEquals(reg.status, 201, reg.text);
        id = reg.body.id;
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
      }
      assert(
        !(await Deno.stat(`${dir}/webhook.key`).catch(() => undefined)),
        "the file's key only",
      );
      child = await spawnBroker({
        dataDir: dir,
        env: { ...PUSH_ENV, BROKER_WEBHOOK_KEY_FILE: keyB },
      });
      try {
        assertEquals(
          (await tryPublish(child.url, "moved", JSON.stringify("unsignable"))).status,
          201,
        );
        const line = await child.logged(
          "webhook cannot be signed: its POSTs fail until this is fixed",
        );
        assert(line.includes("BROKER_WEBHOOK_KEY_FILE"), line);
        let attempts: { error?: string }[] = [];
        for (let i = 0; i < 200 && attempts.length === 0; i++) {
          attempts = (await call(child, "GET", `/api/webhooks/${id}/attempts`)).body;
          if (!attempts.length) await new Promise((r) => setTimeout(r, 10));
        }
        assert(
          attempts[0]?.error?.includes(`Cannot read the secret of webhook "${id}"`),
          JSON.stringify(attempts),
        );
        assertEquals(receiver.verified.size, 0, "nothing was sent, signed or not");
      } finally {
        assertEquals((await stop(child, "SIGTERM")).code, 0);
        await receiver.close();
      }
    }),
});
