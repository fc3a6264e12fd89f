/**
 * The suite's assertions (jsr:@std/assert is unreachable here), named as std names them; every
 * failure is an AssertionError whose message says what differed.
 */

/** Thrown by every assertion here, so a test can tell a failed check from another error. */
export class AssertionError extends Error {
  override name = "AssertionError";
}

export function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  if (!cond) throw new AssertionError(msg);
}

/**
 * Deep, strict equality: primitives by `Object.is`, objects by prototype and own enumerable
 * keys (a key holding `undefined` is not a missing key), arrays and typed arrays element by
 * element, Maps and Sets by their entries, Dates by time, Errors by name and message too.
 */
export function assertEquals<T>(actual: T, expected: T, msg?: string): void {
  if (!equal(actual, expected)) {
    throw new AssertionError(`${prefix(msg)}expected ${show(expected)}, got ${show(actual)}`);
  }
}

/** The opposite of assertEquals. */
export function assertNotEquals<T>(actual: T, expected: T, msg?: string): void {
  if (equal(actual, expected)) {
    throw new AssertionError(`${prefix(msg)}expected anything but ${show(expected)}`);
  }
}

/** The same value (`Object.is`): the same object, not an equal one. */
export function assertStrictEquals<T>(actual: T, expected: T, msg?: string): void {
  if (!Object.is(actual, expected)) {
    throw new AssertionError(
      `${prefix(msg)}expected the very value ${show(expected)}, got ${show(actual)}`,
    );
  }
}

export function assertMatch(actual: string, re: RegExp, msg?: string): void {
  if (!re.test(actual)) {
    throw new AssertionError(`${prefix(msg)}expected ${show(actual)} to match ${re}`);
  }
}

export function assertNotMatch(actual: string, re: RegExp, msg?: string): void {
  if (re.test(actual)) {
    throw new AssertionError(`${prefix(msg)}expected ${show(actual)} not to match ${re}`);
  }
}

/** Fails the test here. */
export function fail(msg: string): never {
  throw new AssertionError(msg);
}

export async function assertRejects(fn: () => Promise<unknown>, code?: string): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    if (code && (e as { code?: string }).code !== code) {
      throw new AssertionError(`expected code ${code}, got ${(e as { code?: string }).code}: ${e}`);
    }
    return e as Error;
  }
  throw new AssertionError("expected a rejection");
}

export function assertThrows(fn: () => unknown, code?: string): Error {
  try {
    fn();
  } catch (e) {
    if (code && (e as { code?: string }).code !== code) {
      throw new AssertionError(`expected code ${code}, got ${(e as { code?: string }).code}: ${e}`);
    }
    return e as Error;
  }
  throw new AssertionError("expected a throw");
}

/** Collects failed checks of a table-driven test, so one run reports every bad case. */
export class Failures {
  readonly list: string[] = [];
  check(label: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.list.push(`${label}: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  /** Fails with every collected case, one per line. */
  assertNone(): void {
    assertEquals(this.list.length, 0, `\n${this.list.join("\n")}`);
  }
}

function prefix(msg: string | undefined): string {
  return msg ? `${msg}: ` : "";
}

function equal(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date) return Object.is(a.getTime(), (b as Date).getTime());
  if (a instanceof RegExp) return String(a) === String(b);
  if (a instanceof Error && (a.name !== (b as Error).name || a.message !== (b as Error).message)) {
    return false;
  }
  if (a instanceof Map) {
    const m = b as Map<unknown, unknown>;
    if (a.size !== m.size) return false;
    for (const [k, v] of a) if (!m.has(k) || !equal(v, m.get(k))) return false;
    return true;
  }
  if (a instanceof Set) {
    const s = b as Set<unknown>;
    if (a.size !== s.size) return false;
    for (const v of a) if (!s.has(v) && ![...s].some((w) => equal(v, w))) return false;
    return true;
  }
  if (ArrayBuffer.isView(a) && !(a instanceof DataView)) {
    const x = a as unknown as ArrayLike<unknown>, y = b as unknown as ArrayLike<unknown>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) return false;
    return true;
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.hasOwn(b, k)) return false;
    if (!equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/** A value for a failure message: JSON, with bytes, Maps, Sets and bigints readable. */
function show(v: unknown): string {
  try {
    return JSON.stringify(v, replacer) ?? String(v);
  } catch {
    return String(v);
  }
}

function replacer(_k: string, v: unknown) {
  if (v instanceof Uint8Array) return `bytes:${Array.from(v).join(",")}`;
  if (v instanceof Map) return Object.fromEntries(v);
  if (v instanceof Set) return [...v];
  if (typeof v === "bigint") return `${v}n`;
  return v;
}
