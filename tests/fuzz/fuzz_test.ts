/**
 * The CI fuzz run: one seed (FUZZ_SEED, else random and printed), about 3,000 generated bad and
 * borderline requests over every route plus the raw-socket framing cases, against the broker as
 * a child process. Any finding fails the test with the report; `deno task fuzz` runs long ones.
 */

import { assertEquals } from "../_support/assert.ts";
import { runCampaign } from "./campaign.ts";
import { formatReport } from "./report.ts";

const seed = Number(Deno.env.get("FUZZ_SEED") ?? Math.floor(Math.random() * 2 ** 31));
const requests = Number(Deno.env.get("FUZZ_REQUESTS") ?? 3_000);

Deno.test({
  name: `fuzz: ${requests} seeded bad requests over every route, raw framing, idle connections`,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    console.log(`fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
    const report = await runCampaign({ seed, requests, mutations: 60, log: console.log });
    const text = formatReport(
      report,
      `FUZZ_SEED=${seed} deno test -A tests/fuzz/fuzz_test.ts`,
    );
    console.log(text);
    assertEquals(
      report.findings.length,
      0,
      `fuzz seed ${seed} found violations (report above)`,
    );
  },
});
