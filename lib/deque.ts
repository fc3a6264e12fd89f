/** @module A FIFO with O(1) push and shift, and removal by position for filtered takes. */

/** An array-backed queue; the consumed head is reclaimed once it is half the array. */
export class Deque<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  /** Slots from head to tail, including entries the caller treats as stale. */
  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  /** Puts an item back at the head. */
  unshift(item: T): void {
    if (this.#head > 0) this.#items[--this.#head] = item;
    else this.#items.unshift(item);
  }

  /** The item at position `i` from the head, without removing it. */
  at(i: number): T | undefined {
    return this.#items[this.#head + i];
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    } else if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    }
    return item;
  }

  /** Removes the item at position `i` from the head (O(n); used by filtered consumes). */
  removeAt(i: number): void {
    if (i === 0) {
      this.shift();
      return;
    }
    this.#items.splice(this.#head + i, 1);
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}
