/**
 * One fuzz campaign: the broker as a child process (so a crash shows) with an admin key and a
 * publish-only key; idle and half-sent connections held open from the start; the raw framing
 * cases; the systematic sweep (fuzz_sweep.ts); then seeded requests and scenarios, every answer
 * judged. It ends with the process alive, a publish → consume → ack round trip, and the idle
 * connections closed by the server. A crash is a finding: the broker is restarted on its data
 * dir and the campaign goes on.
 */

import { type ChildBroker, spawnBroker } from "../_support/child.ts";
import { type FuzzRequest, Generator } from "./generator.ts";
import { judge } from "./check.ts";
import { type Answer, send } from "./http.ts";
import type { Keys } from "./inputs.ts";
import {
  closeIdleProbes,
  type IdleProbe,
  openIdleProbes,
  probeStatuses,
  probeSummary,
} from "./idle.ts";
import { rawCases, sendCase } from "./raw.ts";
import { Findings, type Report } from "./report.ts";
import { SCENARIOS, type Session } from "./scenarios.ts";
import { scenarioSweep, sweepRequests } from "./sweep.ts";

/** What a campaign runs. */
export interface CampaignOptions {
  seed: number;
  /** Generated requests to send (scenario steps included); raw cases come on top. */
  requests: number;
  /** Seeded byte mutations of valid requests, besides the fixed framing cases. */
  mutations: number;
  /** A request with no answer after this long is a finding (default 10 s). */
  timeoutMs?: number;
  /** Log a progress line every this many requests (0: never). */
  progressEvery?: number;
  log?: (line: string) => void;
  /** Restarts after crashes before the campaign gives up (default 20). */
  maxRestarts?: number;
}

/** How often each scenario is picked relative to the others (1 if not listed). */
const SCENARIO_WEIGHT: Record<string, number> = { bigPayload: 0.3, leaseEnds: 3, requeueToDlq: 3 };
/** Chance that a step is a scenario rather than one generated request. */
const SCENARIO_RATE = 0.05;

/** Runs a campaign against a fresh broker child process and reports what it found. */
export async function runCampaign(o: CampaignOptions): Promise<Report> {
  const c = new Campaign(o);
  try {
    await c.run();
  } finally {
    await c.close();
  }
  return c.report();
}

class Campaign {
  readonly keys: Keys;
  readonly findings: Findings;
  readonly gen: Generator;
  readonly log: (line: string) => void;
  readonly t0 = performance.now();
  dataDir = "";
  child?: ChildBroker;
  exited?: Deno.CommandStatus;
  probes: IdleProbe[] = [];
  restarts = 0;
  gaveUp = false;
  readonly session: Session = {
    keys: { admin: "", publish: "" },
    send: (req) => this.request(req),
    fail: (what, req, a) => this.findings.add(what, req, a),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  };

  constructor(readonly o: CampaignOptions) {
    this.keys = { admin: `fz-admin-${o.seed}`, publish: `fz-pub-${o.seed}` };
    this.findings = new Findings(o.seed);
    this.gen = new Generator(o.seed, this.keys);
    this.log = o.log ?? (() => {});
    this.session.keys = this.keys;
  }

  /** True while the campaign should go on sending. */
  get going(): boolean {
    return this.findings.sent < this.o.requests && !this.gaveUp;
  }

  get port(): number {
    return this.child!.port;
  }

  async spawn(): Promise<void> {
    const env = {
      BROKER_API_KEYS: `${this.keys.admin},${this.keys.publish}:publish`,
      BROKER_MAX_QUEUE: "100",
    };
    const child = await spawnBroker({ dataDir: this.dataDir, env });
    this.child = child;
    this.exited = undefined;
    child.exited.then((s) => {
      if (this.child === child) this.exited = s;
    });
    this.probes = await openIdleProbes(child.port, this.keys);
  }

  async run(): Promise<void> {
    this.dataDir = await Deno.makeTempDir({ prefix: "ferry-fuzz-" });
    await this.spawn();
    await this.rawCases();
    const rawSeconds = ((performance.now() - this.t0) / 1000).toFixed(1);
    this.log(`[fuzz] ${this.findings.rawCases} raw answers in ${rawSeconds} s`);
    for (const req of sweepRequests(this.gen)) {
      if (!this.going) break;
      await this.request(req);
      await this.checkAlive();
    }
    for (const [name, topic] of scenarioSweep()) {
      if (!this.going) break;
      await SCENARIOS[name]!(this.session, this.gen.r.fork(), topic);
      await this.checkAlive();
    }
    await this.randomSteps();
    await this.finalChecks();
  }

  /** Seeded steps until the request budget is spent: mostly one request, sometimes a scenario. */
  async randomSteps(): Promise<void> {
    const weights = Object.keys(SCENARIOS).map((n) => [n, SCENARIO_WEIGHT[n] ?? 1] as const);
    const total = weights.reduce((t, [, w]) => t + w, 0);
    const every = this.o.progressEvery || Infinity;
    let nextProgress = this.findings.sent + every;
    while (this.going) {
      const r = this.gen.r;
      if (r.chance(SCENARIO_RATE)) {
        let x = r.float() * total;
        const [name] = weights.find(([, w]) => (x -= w) < 0) ?? weights[0]!;
        await SCENARIOS[name]!(this.session, r.fork());
      } else {
        await this.request(this.gen.next());
      }
      await this.checkAlive();
      if (this.findings.sent >= nextProgress) {
        nextProgress += every;
        this.log(this.findings.progress(this.o.requests, performance.now() - this.t0));
      }
    }
  }

  /** Sends one request, judges the answer, and learns ids from it. */
  async request(req: FuzzRequest): Promise<Answer | undefined> {
    if (this.gaveUp) return undefined;
    this.findings.sending(req);
    const out = await send(this.port, req, this.o.timeoutMs ?? 10_000);
    if ("error" in out) {
      if (req.abortMs !== undefined) return void this.findings.count("aborted on purpose");
      await Promise.race([this.child!.exited, new Promise((r) => setTimeout(r, 500))]);
      if (this.exited) return void await this.checkAlive();
      if (out.timedOut && req.contentLength === undefined) {
        this.findings.add(`no answer within ${this.o.timeoutMs ?? 10_000} ms`, req);
      } else {
        this.findings.networkError(req, out.error);
      }
      return undefined;
    }
    const a = out.answer;
    const v = judge(req, a);
    this.findings.answered(req, a, v.kind === "layer");
    if (v.kind === "violation") this.findings.add(v.what, req, a);
    if (a.status < 300 && a.body.length && req.method.toUpperCase() !== "HEAD") {
      try {
        this.gen.learn(JSON.parse(new TextDecoder().decode(a.body)));
      } catch { /* not JSON */ }
    }
    return a;
  }

  /** A crash is a finding with the last requests and the log tail; then restart. */
  async checkAlive(): Promise<void> {
    if (!this.exited || this.gaveUp) return;
    const s = this.exited;
    // The error line names the crash; quoted values (topic names) would split one bug in many.
    const error = this.child!.logs.findLast((l) => l.startsWith("error:"))
      ?.replace(/"[^"]*"/g, '"…"').slice(0, 200);
    const what = `broker process exited (code ${s.code}, signal ${s.signal})`;
    this.findings.crash(error ? `${what}: ${error}` : what, this.child!);
    await closeIdleProbes(this.probes);
    if (this.restarts >= (this.o.maxRestarts ?? 20)) {
      this.gaveUp = true;
      return;
    }
    this.restarts++;
    this.log(`[fuzz] broker crashed; restarting it on ${this.dataDir}`);
    try {
      await this.spawn();
    } catch (e) {
      this.findings.crash(`broker does not restart after the crash: ${(e as Error).message}`);
      this.gaveUp = true;
    }
  }

  /** Framing cases and byte mutations over raw sockets: no 5xx, and the broker keeps serving. */
  async rawCases(): Promise<void> {
    const cases = rawCases(this.keys, this.o.seed, this.o.mutations);
    for (let i = 0; i < cases.length && !this.gaveUp; i += 8) {
      const batch = cases.slice(i, i + 8);
      await Promise.all(batch.map(async (c) => {
        try {
          for (const status of await sendCase(this.port, c)) this.findings.raw(c, status);
        } catch (e) {
          this.findings.raw(c, 0, (e as Error).message);
        }
      }));
      await new Promise((r) => setTimeout(r, 20)); // a crash needs a moment to show
      const health = await this.request({ method: "GET", path: "/healthz", headers: [], tags: [] });
      if (health?.status !== 200) {
        const names = batch.map((c) => c.name).join(" | ");
        this.findings.crash(`broker stopped serving after the raw cases: ${names}`);
      }
      await this.checkAlive();
    }
  }

  /**
   * The process is alive, a round trip works, and no idle or half-sent connection got a 5xx.
   * Those still open are reported, not judged: Deno.serve has no header or idle timeout, so
   * closing them is a proxy's job (docs/operating.md, "Limits of the HTTP layer").
   */
  async finalChecks(): Promise<void> {
    await this.checkAlive();
    if (this.gaveUp) return;
    await this.roundTrip();
    for (const p of this.probes) {
      for (const s of probeStatuses(p)) {
        if (s >= 500) this.findings.note(`idle connection answered ${s}: ${p.name}`);
      }
      if (p.closedAt === undefined) this.log(`[fuzz] held open by the runtime: ${probeSummary(p)}`);
    }
  }

  /** Publish → consume → ack on a fresh topic with the admin key. */
  async roundTrip(): Promise<void> {
    const t = `fzp-final-${this.o.seed}`;
    const step = (method: string, path: string, body?: string): FuzzRequest => ({
      method,
      path,
      headers: [["authorization", `Bearer ${this.keys.admin}`]],
      body: body === undefined ? undefined : new TextEncoder().encode(body),
      tags: ["final-round-trip"],
    });
    const pub = step("POST", `/publish/${t}`, "round-trip");
    const published = await this.request(pub);
    if (published?.status !== 201) {
      return this.findings.add("round trip: publish failed", pub, published);
    }
    const consume = step("GET", `/consume/${t}`);
    const got = await this.request(consume);
    let id = "";
    try {
      id = JSON.parse(new TextDecoder().decode(got?.body)).id ?? "";
    } catch { /* judged next */ }
    if (got?.status !== 200 || !id) {
      return this.findings.add("round trip: consume failed", consume, got);
    }
    const ack = step("POST", `/ack/${t}/${id}`);
    const acked = await this.request(ack);
    if (acked?.status !== 204) this.findings.add("round trip: ack failed", ack, acked);
  }

  /** Kills the broker, closes the probes and removes the data dir. */
  async close(): Promise<void> {
    await closeIdleProbes(this.probes);
    if (this.child) {
      this.child.kill("SIGKILL");
      await this.child.exited;
      await this.child.ended;
    }
    if (this.dataDir) await Deno.remove(this.dataDir, { recursive: true }).catch(() => {});
  }

  /** What the campaign found. */
  report(): Report {
    return this.findings.report(performance.now() - this.t0, this.restarts);
  }
}
