import { assertEquals } from "../../_support/assert.ts";
import { FILTER_SCAN_WINDOW, Group } from "../../../lib/delivery/group.ts";
import { type Delivery, PayloadFilter, StoredMessage } from "../../../lib/message.ts";
import { bytes, T0, text } from "../_broker.ts";

const HIGH = 0, NORMAL = 1, LOW = 2;
const never = () => false;

/** A stored message with payload `p` (its text is its name in these tests). */
function msg(p: string, priority = NORMAL): StoredMessage {
  return new StoredMessage({
    id: p,
    seq: 0,
    timestamp: T0,
    payload: bytes(p),
    priority,
    expiresAt: 0,
    headers: undefined,
    idemKey: undefined,
    redriveCount: 0,
    origin: undefined,
    reason: undefined,
  }, 0);
}

const names = (ds: Delivery[]) => ds.map((d) => text(d.msg.readPayload()));
const counts = (g: Group) => [g.readyCount, g.delayedCount, g.inFlightCount, g.held];

Deno.test("Group.add() makes a delivery ready by priority, or delayed until its due time", () => {
  const g = new Group("billing", T0);
  g.add(msg("n1"), 0, 0, T0);
  g.add(msg("later"), 0, T0 + 100, T0);
  g.add(msg("due"), 0, T0, T0); // due now: ready
  g.add(msg("h1", HIGH), 0, 0, T0);
  assertEquals(counts(g), [3, 1, 0, 4]);
  assertEquals(names(g.take(10, undefined, never, true)), ["h1", "n1", "due"]);
});

Deno.test("Group.take() goes high to low, FIFO within a priority, leaving what the filter skips", () => {
  const g = new Group("", T0);
  for (
    const [p, prio] of [["l1", LOW], ["n1", NORMAL], ["h1", HIGH], ["n2", NORMAL], ["h2", HIGH]]
  ) {
    g.add(msg(p as string, prio as number), 0, 0, T0);
  }
  const notN1 = { accepts: (m: StoredMessage) => text(m.readPayload()) !== "n1" };
  const taken = g.take(3, notN1, never);
  assertEquals(names(taken), ["h1", "h2", "n2"]);
  for (const d of taken) g.lease(d, T0 + 1_000);
  assertEquals(names(g.take(10, undefined, never, true)), ["n1", "l1"], "n1 stays first");
  assertEquals(counts(g), [2, 0, 3, 5]);
});

Deno.test("Group.take() stops before maxBytes but always takes one; a peek leaves all ready", () => {
  const g = new Group("", T0);
  for (const p of ["aaaa", "bbbb", "cccc"]) g.add(msg(p), 0, 0, T0);
  assertEquals(names(g.take(10, undefined, never, true, 8)), ["aaaa", "bbbb"]);
  assertEquals(names(g.take(10, undefined, never, true, 1)), ["aaaa"]);
  assertEquals(g.readyCount, 3, "peeks take nothing out");
  // Past the budget nothing lower in order is taken, even if it would fit.
  const h = new Group("", T0);
  h.add(msg("big-one"), 0, 0, T0);
  h.add(msg("huge-payload"), 0, 0, T0);
  h.add(msg("s"), 0, 0, T0);
  assertEquals(names(h.take(10, undefined, never, false, 10)), ["big-one"]);
});

Deno.test("Group.take() drops the deliveries `isExpired` reports and stale entries", () => {
  const g = new Group("", T0);
  const [a, b] = [g.add(msg("a"), 0, 0, T0), g.add(msg("b"), 0, 0, T0)];
  g.add(msg("c"), 0, 0, T0);
  g.remove(a); // an ack: its FIFO entry goes stale
  const expired = (d: Delivery) => d === b;
  assertEquals(names(g.take(10, undefined, expired)), ["c"]);
  assertEquals(g.ready[NORMAL].length, 0, "both stale entries were dropped on the way");
});

Deno.test("Group.endedLeases() returns only the latest lease of a delivery still in flight", () => {
  const g = new Group("", T0);
  const [a, b, c] = ["a", "b", "c"].map((p) => g.add(msg(p), 0, 0, T0));
  for (const d of g.take(3, undefined, never)) g.lease(d, T0 + 1_000);
  g.touch(a!, T0 + 5_000); // its first lease entry goes stale
  g.remove(b!); // acked: its entry goes stale
  assertEquals(names(g.endedLeases(T0 + 999)), []);
  assertEquals(names(g.endedLeases(T0 + 1_000)), ["c"]);
  assertEquals(names(g.endedLeases(T0 + 1_000)), [], "removed from the heap");
  assertEquals(c!.at, T0 + 1_000);
  assertEquals(names(g.endedLeases(T0 + 5_000)), ["a"]);
  assertEquals(counts(g), [0, 0, 2, 2], "endedLeases() changes no state");
});

Deno.test("Group.unlease() puts leases back at the head in order, counting no attempt", () => {
  const g = new Group("", T0);
  for (const p of ["a", "b", "c"]) g.add(msg(p), 0, 0, T0);
  const taken = g.take(2, undefined, never);
  for (const d of taken) g.lease(d, T0 + 1_000);
  g.unlease(taken);
  assertEquals(counts(g), [3, 0, 0, 3]);
  assertEquals(names(g.take(10, undefined, never, true)), ["a", "b", "c"]);
  assertEquals(taken.map((d) => d.retryCount), [0, 0]);
  assertEquals(names(g.endedLeases(T0 + 1_000)), [], "their lease entries went stale");
});

Deno.test("Group.promoteDue() readies what came due and skips stale delayed entries", () => {
  const g = new Group("", T0);
  const early = g.add(msg("early"), 0, T0 + 100, T0);
  g.add(msg("late"), 0, T0 + 200, T0);
  g.add(msg("soon"), 0, T0 + 150, T0);
  // Requeued with no delay: the old delayed entry goes stale, the new delivery is ready.
  const again = g.requeue(early, 1, 0, T0 + 50, "retry");
  assertEquals([again.retryCount, again.reason, counts(g)], [1, "retry", [1, 2, 0, 3]]);
  assertEquals(g.promoteDue(T0 + 149), 0, "the stale entry of 'early' is not counted");
  assertEquals(g.promoteDue(T0 + 200), 2);
  assertEquals(names(g.take(10, undefined, never, true)), ["early", "soon", "late"]);
  assertEquals(counts(g), [3, 0, 0, 3]);
});

Deno.test("Group.clear() forgets every delivery in every state", () => {
  const g = new Group("", T0);
  g.add(msg("a"), 0, 0, T0);
  g.add(msg("b"), 0, T0 + 100, T0);
  const [c] = g.take(1, undefined, never);
  g.lease(c!, T0 + 1_000);
  g.add(msg("d"), 0, 0, T0);
  g.clear();
  assertEquals(counts(g), [0, 0, 0, 0]);
  assertEquals([g.take(10, undefined, never), g.endedLeases(T0 + 1e9), g.promoteDue(T0 + 1e9)], [
    [],
    [],
    0,
  ]);
});

Deno.test("Group.take() with a filter examines at most FILTER_SCAN_WINDOW deliveries", () => {
  const g = new Group("", T0);
  const doc = (i: number, k: string) => msg(JSON.stringify({ i, k }));
  const at = (ds: Delivery[]) => ds.map((d) => JSON.parse(text(d.msg.readPayload())).i);
  for (let i = 0; i < FILTER_SCAN_WINDOW - 1; i++) g.add(doc(i, "no"), 0, 0, T0);
  g.add(doc(FILTER_SCAN_WINDOW - 1, "yes"), 0, 0, T0); // the last one the window holds
  g.add(doc(FILTER_SCAN_WINDOW, "yes"), 0, 0, T0); // the first one past it
  const yes = new PayloadFilter("k", "yes");
  const first = g.take(10, yes, never);
  assertEquals(at(first), [FILTER_SCAN_WINDOW - 1], "a match inside the window is found");
  assertEquals(g.examined, FILTER_SCAN_WINDOW, "and nothing past the window is examined");
  for (const d of first) g.lease(d, T0 + 1_000);
  // With one taken from the window, the next match has moved into it.
  assertEquals(at(g.take(10, yes, never)), [FILTER_SCAN_WINDOW]);
  assertEquals(g.examined, 2 * FILTER_SCAN_WINDOW);
  assertEquals(g.take(1, undefined, never, true).length, 1, "an unfiltered take counts nothing");
  assertEquals(g.examined, 2 * FILTER_SCAN_WINDOW);
});

Deno.test("Group.takeFresh() hands what became ready while a filtered consumer watches, once", () => {
  const g = new Group("", T0);
  g.add(msg("before"), 0, 0, T0);
  g.watch(1);
  g.add(msg("new"), 0, 0, T0);
  g.add(msg("later"), 0, T0 + 100, T0);
  assertEquals(names([...g.takeFresh()!]), ["new"]);
  assertEquals(g.takeFresh(), [], "each only once");
  g.promoteDue(T0 + 100);
  assertEquals(names([...g.takeFresh()!]), ["later"], "a delay that came due is fresh");
  for (let i = 0; i <= FILTER_SCAN_WINDOW; i++) g.add(msg(`m${i}`), 0, 0, T0);
  assertEquals(g.takeFresh(), undefined, "more than a window came: the watchers scan instead");
  g.watch(-1);
  g.add(msg("unwatched"), 0, 0, T0);
  assertEquals(g.takeFresh(), [], "nothing is noted while nobody watches");
});

Deno.test("Group.take() among fresh deliveries takes by priority; an unlease puts back one entry", () => {
  const g = new Group("", T0);
  g.watch(1);
  for (const [p, prio] of [["n1", NORMAL], ["h1", HIGH], ["n2", NORMAL]] as const) {
    g.add(msg(p, prio), 0, 0, T0);
  }
  const fresh = g.takeFresh()!;
  const notN2 = { accepts: (m: StoredMessage) => text(m.readPayload()) !== "n2" };
  const taken = g.take(5, notN2, never, false, Infinity, fresh);
  assertEquals(names(taken), ["h1", "n1"]);
  for (const d of taken) g.lease(d, T0 + 1_000);
  assertEquals(counts(g), [1, 0, 2, 3]);
  g.unlease(taken);
  assertEquals(names([...g.takeFresh()!]), ["n1", "h1"], "what comes back is fresh again");
  assertEquals(names(g.take(10, undefined, never, true)), ["h1", "n1", "n2"], "each once");
  assertEquals(counts(g), [3, 0, 0, 3]);
});
