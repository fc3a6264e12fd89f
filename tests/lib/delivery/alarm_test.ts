import { assert, assertEquals } from "../../_support/assert.ts";
import { Alarm } from "../../../lib/delivery/alarm.ts";

/** An alarm on the real clock whose rings are heard as promises. */
function alarm() {
  const rings: number[] = [];
  let heard = Promise.withResolvers<number>();
  const a = new Alarm(() => performance.now(), (now) => {
    rings.push(now);
    heard.resolve(now);
    heard = Promise.withResolvers<number>();
  });
  return { a, rings, next: () => heard.promise };
}

Deno.test("Alarm rings once at start, then at the time asked for, not before", async () => {
  const { a, rings, next } = alarm();
  a.start();
  await next();
  assertEquals(rings.length, 1);
  const at = performance.now() + 30;
  a.request(at);
  const rang = await next();
  // Timers are whole milliseconds: within one of the time is on time.
  assert(rang >= at - 1, `rang ${at - rang} ms early`);
  assertEquals(rings.length, 2);
  a.stop();
});

Deno.test("Alarm.request() only moves the alarm earlier; set() replaces it", async () => {
  const { a, next } = alarm();
  a.start();
  await next();
  const soon = performance.now() + 20;
  a.request(soon);
  a.request(soon + 10_000); // later: ignored
  assertEquals(a.at, soon);
  a.set(Infinity);
  assertEquals(a.at, Infinity, "set() may move it later, or disarm it");
  a.set(soon);
  assert(await next() >= soon - 1);
  a.stop();
});

Deno.test("Alarm does nothing before start() or after stop()", () => {
  const { a, rings } = alarm();
  a.request(0);
  assertEquals(a.at, Infinity);
  a.start();
  a.stop();
  a.request(0);
  assertEquals([a.at, rings.length], [Infinity, 0]);
});
