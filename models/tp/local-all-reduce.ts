// The AllReduce of a group whose members share one process (the T ranks of a TP group, or
// the replicas of a stage, run in-process): each member's call waits until every member has
// contributed under the same key, then all get the sum, added in member order 0, 1, … in
// the arrays' precision (float32, or float64 for Floats = Float64Array), whatever order the calls came in.

import { AllReduce, Floats, sumInOrder } from '../all-reduce';

export class AllReduceError extends Error {
  override name = 'AllReduceError';
}

interface Round<A extends Floats> {
  readonly parts: (A | undefined)[];
  arrived: number;
  readonly waiters: { resolve: (sum: A) => void; reject: (err: Error) => void }[];
}

export class LocalGroup<A extends Floats = Float32Array> {
  private readonly rounds = new Map<string, Round<A>>();

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new AllReduceError(`a group needs a positive size, got ${size}`);
  }

  /** The AllReduce member `index` calls. */
  member(index: number): AllReduce<A> {
    if (!Number.isInteger(index) || index < 0 || index >= this.size)
      throw new AllReduceError(`member ${index} is outside 0..${this.size - 1}`);
    return (key, data) => this.contribute(index, key, data);
  }

  /** Keys some but not all members have contributed to. */
  pendingKeys(): string[] {
    return [...this.rounds.keys()];
  }

  private contribute(index: number, key: string, data: A): Promise<A> {
    let round = this.rounds.get(key);
    if (!round) {
      round = { parts: new Array(this.size).fill(undefined), arrived: 0, waiters: [] };
      this.rounds.set(key, round);
    }
    const r = round;
    return new Promise<A>((resolve, reject) => {
      if (r.parts[index]) return reject(new AllReduceError(`${key}: member ${index} contributed twice`));
      const other = r.parts.find((p) => p !== undefined);
      if (other && other.length !== data.length)
        return reject(
          new AllReduceError(`${key}: member ${index} contributed ${data.length} values, another ${other.length}`),
        );
      r.parts[index] = data.slice() as A;
      r.arrived++;
      r.waiters.push({ resolve, reject });
      if (r.arrived < this.size) return;
      this.rounds.delete(key);
      const sum = sumInOrder(r.parts as A[]);
      for (const w of r.waiters) w.resolve(sum.slice() as A);
    });
  }
}
