// Gradient accumulation in microbatch order whatever the execution order: each
// microbatch's gradients wait until every earlier one has been added, so the sums, and
// therefore training, are bitwise identical for every policy and jitter seed.
// The sums are kept in float64 and rounded to float32 once, when read (result()): a sum
// of a few float32 values is then exact in all but extreme cases (addends more than 2^29
// apart in magnitude), so how the microbatches were grouped (one pipeline of D·M, or D
// replicas of M whose float64 partial sums are added at the flush) does not change the
// float32 result. That costs 8 bytes per parameter instead of 4 while an iteration runs.

export class OrderedSumError extends Error {
  override name = 'OrderedSumError';
}

export class OrderedSum {
  private readonly sums: Float64Array[];
  private readonly pending = new Map<number, Float32Array[]>();
  private next = 0;
  private rounded: Float32Array[] | null = null;

  constructor(
    private readonly sizes: readonly number[],
    private readonly count: number,
  ) {
    this.sums = sizes.map((n) => new Float64Array(n));
  }

  /** How many microbatches have been folded in (0..count). */
  get added(): number {
    return this.next;
  }

  get complete(): boolean {
    return this.next === this.count;
  }

  add(mb: number, grads: readonly Float32Array[]): void {
    if (!Number.isInteger(mb) || mb < 0 || mb >= this.count)
      throw new OrderedSumError(`microbatch ${mb} is outside 0..${this.count - 1}`);
    if (mb < this.next || this.pending.has(mb))
      throw new OrderedSumError(`gradients of microbatch ${mb} were added twice`);
    if (grads.length !== this.sizes.length)
      throw new OrderedSumError(`microbatch ${mb}: ${grads.length} gradients for ${this.sizes.length} parameters`);
    grads.forEach((g, i) => {
      if (g.length !== this.sizes[i])
        throw new OrderedSumError(`microbatch ${mb}, parameter ${i}: ${g.length} values, expected ${this.sizes[i]}`);
    });
    this.pending.set(mb, grads as Float32Array[]);
    for (let g = this.pending.get(this.next); g; g = this.pending.get(this.next)) {
      this.pending.delete(this.next);
      for (let i = 0; i < g.length; i++) {
        const s = this.sums[i];
        const x = g[i];
        for (let k = 0; k < s.length; k++) s[k] += x[k];
      }
      this.next++;
    }
  }

  /**
   * The float64 sums, once every microbatch was added, to read (the replicas' all-reduce
   * sends them); not to write: setSums replaces them.
   */
  partials(): readonly Float64Array[] {
    this.checkComplete();
    return this.sums;
  }

  /**
   * Replaces the float64 sums (once every microbatch was added) by `sums`, one array per
   * parameter of its size (the replicas' all-reduce of them); result() rounds them afresh.
   */
  setSums(sums: readonly ArrayLike<number>[]): void {
    this.checkComplete();
    if (sums.length !== this.sums.length)
      throw new OrderedSumError(`${sums.length} sums for ${this.sums.length} parameters`);
    sums.forEach((v, i) => {
      if (v.length !== this.sizes[i])
        throw new OrderedSumError(`sum of parameter ${i}: ${v.length} values, expected ${this.sizes[i]}`);
    });
    sums.forEach((v, i) => this.sums[i].set(v));
    this.rounded = null;
  }

  /** The sums rounded to float32 (the same arrays on every call); only once every microbatch was added. */
  result(): Float32Array[] {
    this.checkComplete();
    this.rounded ??= this.sums.map((s) => Float32Array.from(s));
    return this.rounded;
  }

  private checkComplete(): void {
    if (!this.complete) throw new OrderedSumError(`only ${this.next} of ${this.count} microbatches were added`);
  }
}
