/**
 * @module Section `security` (rows 14). 14a: wrk publishing 1 KiB at 64 connections, plain HTTP
 * and HTTPS (BROKER_TLS_CERT, a throwaway CA's certificate) in the same run, with the broker's
 * CPU per publish. 14b: per-key limits: a calm key publishing one message at a time alone, then
 * again while another key (limited to 200/s) is hammered by 64 loops of the TypeScript client,
 * which waits out each 429; the calm key's p99 loaded against unloaded.
 */

import { busyNote, procTicks, quiet, USER_HZ } from "../harness/cpu.ts";
import { int, log, ms } from "../harness/format.ts";
import type { Options, Plan } from "../harness/plan.ts";
import { clientResult, runClient, withBroker } from "../harness/spawn.ts";
import { wrkTimed } from "../harness/wrk.ts";
import { row, verdict } from "../report.ts";
import { makePki } from "../../_support/tls.ts";

export async function security(o: Options, p: Plan): Promise<void> {
  const pki = await makePki();
  try {
    const rates = new Map<string, { rate: number; cpu: number; p99: number }>();
    for (const scheme of ["http", "https"] as const) {
      const tls = scheme === "https" ? ["--tls-cert", pki.certFile, "--tls-key", pki.keyFile] : [];
      await withBroker(
        o,
        10_000_000,
        async (b) => {
          const url = b.url.replace("http:", `${scheme}:`);
          const run = { script: "publish.lua", threads: 1, conns: 64, args: ["1024"] };
          await quiet();
          await wrkTimed({ ...run, url: `${url}/publish/warm`, seconds: p.warmS });
          const t0 = await procTicks(b.pid);
          const w = await wrkTimed({ ...run, url: `${url}/publish/bench`, seconds: p.runS });
          const ticks = await procTicks(b.pid) - t0;
          const done = w.requests - w.status_errors;
          const rate = done / (w.duration_us / 1e6);
          rates.set(scheme, { rate, cpu: ticks / USER_HZ * 1e6 / done, p99: w.p99_us });
          log(`publish c=64 over ${scheme}: ${int(rate)} msg/s`);
        },
        [],
        tls,
      );
    }
    const plain = rates.get("http")!;
    for (const scheme of ["http", "https"] as const) {
      const r = rates.get(scheme)!;
      row({
        section: "14a",
        measure: `publish 1 KiB over ${scheme === "https" ? "HTTPS" : "plain HTTP"}, msg/s`,
        conns: "64",
        result: int(r.rate),
        p99: ms(r.p99),
        notes: [
          `broker CPU ${r.cpu.toFixed(1)} µs a publish`,
          scheme === "https" ? `${(r.rate / plain.rate).toFixed(2)} × plain HTTP` : "",
          await busyNote(),
        ].filter(Boolean).join("; "),
        target: "",
        status: "",
      });
    }
  } finally {
    await pki.remove();
  }

  // From a file: the server refuses keys on its command line (docs/operating.md).
  const keys = await Deno.makeTempFile({ prefix: "ferry-bench-keys-" });
  await Deno.writeTextFile(
    keys,
    "hammer-key:publish name=hammer rate=200/s\ncalm-key:publish name=calm\n",
  );
  await withBroker(
    o,
    10_000_000,
    async (b) => {
      const seconds = String(Math.max(3, p.runS));
      await quiet();
      const alone = await clientResult(
        runClient(["measure", b.url, "calm-key", seconds], "fair_client.ts"),
      );
      await quiet();
      const [hammer, loaded] = await Promise.all([
        clientResult(runClient(["hammer", b.url, "hammer-key", seconds, "64"], "fair_client.ts")),
        clientResult(runClient(["measure", b.url, "calm-key", seconds], "fair_client.ts")),
      ]);
      log(`calm key p99 ${alone.p99_ms} ms alone, ${loaded.p99_ms} ms beside the hammered key`);
      const ratio = loaded.p99_ms / alone.p99_ms;
      row({
        section: "14b",
        measure: "one key's publish p99 while another key is hammered past its rate=200/s",
        conns: "1 + 64",
        result: `${loaded.p99_ms.toFixed(2)} ms`,
        p50: `${loaded.p50_ms.toFixed(2)} ms`,
        p99: `${loaded.p99_ms.toFixed(2)} ms`,
        notes: [
          `alone: p99 ${alone.p99_ms.toFixed(2)} ms (${ratio.toFixed(2)} ×)`,
          `hammer let through ${hammer.published} in ${seconds} s`,
          await busyNote(),
        ].filter(Boolean).join("; "),
        target: "≤ 2 × alone",
        status: verdict(ratio <= 2),
      });
    },
    [],
    ["--api-keys-file", keys],
  ).finally(() => Deno.remove(keys));
}
