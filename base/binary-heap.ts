// A binary heap of numbers (task indices, event codes) ordered by a comparator, for the
// list schedulers of checks/ (the lower bound's relaxation, the offline schedule).

/** Ordered by `before`: the top is an item no other comes before. */
export class Heap {
  private items: number[] = [];
  constructor(private readonly before: (a: number, b: number) => boolean) {}
  get size(): number {
    return this.items.length;
  }
  peek(): number {
    return this.items[0];
  }
  push(x: number): void {
    const { items, before } = this;
    let i = items.length;
    items.push(x);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(x, items[p])) break;
      items[i] = items[p];
      i = p;
    }
    items[i] = x;
  }
  pop(): number {
    const { items, before } = this;
    const top = items[0];
    const x = items.pop()!;
    const n = items.length;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && before(items[c + 1], items[c])) c++;
      if (!before(items[c], x)) break;
      items[i] = items[c];
      i = c;
    }
    items[i] = x;
    return top;
  }
}
