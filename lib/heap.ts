/** @module A binary min-heap keyed by a number (a due time), for delays, leases and TTLs. */

/** A min-heap of items ordered by `key`; stale items are skipped by the caller, not removed. */
export class Heap<T> {
  #keys: number[] = [];
  #items: T[] = [];

  /** `onFront` hears a key that became the smallest (a deadline earlier than any held). */
  constructor(private readonly onFront?: (key: number) => void) {}

  /** The smallest key, or Infinity when empty. */
  peekKey(): number {
    return this.#keys.length ? this.#keys[0]! : Infinity;
  }

  push(key: number, item: T): void {
    const keys = this.#keys, items = this.#items;
    let i = keys.length;
    keys.push(key);
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent]! <= key) break;
      keys[i] = keys[parent]!;
      items[i] = items[parent]!;
      i = parent;
    }
    keys[i] = key;
    items[i] = item;
    if (i === 0) this.onFront?.(key);
  }

  /** The item with the smallest key, left in place. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** Removes and returns the item with the smallest key. */
  pop(): T | undefined {
    const keys = this.#keys, items = this.#items;
    if (!items.length) return undefined;
    const top = items[0];
    const lastKey = keys.pop()!;
    const lastItem = items.pop()!;
    const n = items.length;
    if (n) {
      let i = 0;
      while (true) {
        let child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && keys[child + 1]! < keys[child]!) child++;
        if (keys[child]! >= lastKey) break;
        keys[i] = keys[child]!;
        items[i] = items[child]!;
        i = child;
      }
      keys[i] = lastKey;
      items[i] = lastItem;
    }
    return top;
  }

  /** Every item, stale ones included, in no particular order. */
  values(): readonly T[] {
    return this.#items;
  }

  clear(): void {
    this.#keys = [];
    this.#items = [];
  }
}
