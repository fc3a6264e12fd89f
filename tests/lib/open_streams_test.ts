import { assertEquals } from "../_support/assert.ts";
import { parseKeyList } from "../../lib/auth.ts";
import { OpenStreams, type Revoked } from "../../lib/open_streams.ts";

Deno.test("OpenStreams.revoke() ends the streams of keys gone or without their scope, and no others", () => {
  const [gone, narrowed, kept] = parseKeyList("gone-1:consume,narrowed-2,kept-3:consume");
  const streams = new OpenStreams();
  const ended: [string, Revoked][] = [];
  const add = (name: string, digest: Uint8Array) =>
    streams.add({ digest, scope: "consume", end: (why) => ended.push([name, why]) });
  add("gone", gone!.digest);
  add("narrowed", narrowed!.digest);
  add("kept", kept!.digest);
  const released = add("released", gone!.digest);
  released(); // closed by itself before the reload
  const after = parseKeyList("narrowed-2:publish,kept-3:consume");
  assertEquals(streams.revoke(after), 2);
  assertEquals(ended, [
    ["gone", { code: "unauthorized", detail: "API key revoked" }],
    ["narrowed", { code: "forbidden", detail: 'API key no longer has the "consume" scope' }],
  ]);
  assertEquals(streams.size, 1);
  assertEquals(streams.revoke(after), 0, "each stream is ended once");
});
