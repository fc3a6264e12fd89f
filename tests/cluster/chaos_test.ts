/**
 * The chaos loop, short: two SIGKILLs of the leader under publishing and acking. `deno task
 * chaos --kills 20` runs the long loop and prints the failover times.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { runChaos } from "./chaos.ts";

Deno.test("killing the leader under load loses no acknowledged publish and undoes no ack", async () => {
  const r = await runChaos({ kills: 2, log: (l) => console.log(l) });
  console.log(
    `chaos: ${r.published} published, ${r.acked} acked, failovers ${r.failovers.join(", ")} ms`,
  );
  assertEquals(r.violations, []);
  assert(r.published > 0 && r.acked > 0, "the load ran");
  assertEquals(r.failovers.length, 2);
});
