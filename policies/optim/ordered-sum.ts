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

/** Adds g into sum element by element (sum[k] += g[k]). */
export type Accumulate = (sum: Float64Array, g: Float32Array) => void;

function addTo(sum: Float64Array, g: Float32Array): void {
  for (let k = 0; k < sum.length; k++) sum[k] += g[k];
}

export class OrderedSum {
  private readonly sums: Float64Array[];
  private readonly pending = new Map<number, Float32Array[]>();
  private next = 0;
  private rounded: Float32Array[] | null = null;

  constructor(
    private readonly sizes: readonly number[],
    private readonly count: number,
    /** sum[k] += g[k] for every k (a native loop may stand in: each addition is the same IEEE one). */
    private readonly accumulate: Accumulate = addTo,
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

  /**
   * Folds microbatch `mb`'s gradients in once every earlier microbatch's are. `grads` are
   * read during the call only (views of a backend's memory will do): the ones that must
   * wait for an earlier microbatch are copied.
   */
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
    if (mb !== this.next) {
      this.pending.set(
        mb,
        grads.map((g) => g.slice()),
      );
      return;
    }
    this.fold(grads);
    for (let g = this.pending.get(this.next); g; g = this.pending.get(this.next)) {
      this.pending.delete(this.next);
      this.fold(g);
    }
  }

  private fold(grads: readonly Float32Array[]): void {
    grads.forEach((g, i) => this.accumulate(this.sums[i], g));
    this.next++;
  }

  /**
   * Empties the sums for another `count` microbatches, keeping their memory: a fresh array
   * of 8 bytes a parameter costs its page faults again at the first addition (measured
   * ~13 ms for 1.6M parameters, 20 times the addition itself).
   */
  reset(): this {
    for (const s of this.sums) s.fill(0);
    this.pending.clear();
    this.next = 0;
    this.rounded = null;
    return this;
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
    // Each rounded to nearest, as Float32Array.from does, but in one pass.
    this.rounded ??= this.sums.map((s) => new Float32Array(s));
    return this.rounded;
  }

  private checkComplete(): void {
    if (!this.complete) throw new OrderedSumError(`only ${this.next} of ${this.count} microbatches were added`);
  }
}
