import { assert, assertEquals, assertRejects } from "../../_support/assert.ts";
import { loadSecretBox, SecretBox, WEBHOOK_KEY_FILE } from "../../../lib/push/secret_box.ts";

const key = (fill: number) => new Uint8Array(32).fill(fill);

Deno.test("SecretBox.seal() hides the secret; open() gives it back for that webhook only", async () => {
  const box = await SecretBox.of(key(1), "test");
  const sealed = await box.seal("whsec_abc", "hook-1");
  assert(!new TextDecoder().decode(sealed).includes("whsec_abc"));
  assertEquals(await box.open(sealed, "hook-1"), "whsec_abc");
  const moved = await assertRejects(() => box.open(sealed, "hook-2"));
  assert(String(moved).includes(`Cannot read the secret of webhook "hook-2"`), String(moved));
  const other = await SecretBox.of(key(2), "other.key");
  const e = await assertRejects(() => other.open(sealed, "hook-1"));
  for (const part of [box.id, other.id, "BROKER_WEBHOOK_KEY_FILE"]) {
    assert(String(e).includes(part), String(e));
  }
});

Deno.test("loadSecretBox() makes the data dir's key once, 0600, however many load it at once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-key-" });
  const boxes = await Promise.all(
    Array.from({ length: 4 }, () => loadSecretBox({ dataDir: dir, webhookKeyFile: "" })),
  );
  assertEquals(new Set(boxes.map((b) => b.id)).size, 1);
  assertEquals(await Array.fromAsync(Deno.readDir(dir), (e) => e.name), [WEBHOOK_KEY_FILE]);
  assertEquals((await Deno.stat(`${dir}/${WEBHOOK_KEY_FILE}`)).mode! & 0o777, 0o600);
  const again = await loadSecretBox({ dataDir: dir, webhookKeyFile: "" });
  assertEquals(again.id, boxes[0]!.id);
  await Deno.writeTextFile(`${dir}/${WEBHOOK_KEY_FILE}`, "not a key\n");
  const e = await assertRejects(() => loadSecretBox({ dataDir: dir, webhookKeyFile: "" }));
  assert(String(e).includes("is not a webhook key"), String(e));
  await Deno.remove(dir, { recursive: true });
});
