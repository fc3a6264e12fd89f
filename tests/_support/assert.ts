/** Minimal assertions (jsr:@std/assert is unreachable here); messages say what differed. */

export function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  if (!cond) throw new Error(msg);
}

export function assertEquals<T>(actual: T, expected: T, msg?: string): void {
  const a = JSON.stringify(actual, replacer), e = JSON.stringify(expected, replacer);
  if (a !== e) throw new Error(`${msg ? msg + ": " : ""}expected ${e}, got ${a}`);
}

export async function assertRejects(fn: () => Promise<unknown>, code?: string): Promise<Error> {
  try {
    await fn();
  } catch (e) {
    if (code && (e as { code?: string }).code !== code) {
      throw new Error(`expected code ${code}, got ${(e as { code?: string }).code}: ${e}`);
    }
    return e as Error;
  }
  throw new Error("expected a rejection");
}

export function assertThrows(fn: () => unknown, code?: string): Error {
  try {
    fn();
  } catch (e) {
    if (code && (e as { code?: string }).code !== code) {
      throw new Error(`expected code ${code}, got ${(e as { code?: string }).code}: ${e}`);
    }
    return e as Error;
  }
  throw new Error("expected a throw");
}

function replacer(_k: string, v: unknown) {
  if (v instanceof Uint8Array) return `bytes:${Array.from(v).join(",")}`;
  if (v instanceof Map) return Object.fromEntries(v);
  if (v instanceof Set) return [...v];
  return v;
}
