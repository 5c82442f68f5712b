// The AllReduce of a group whose members share one process (the T ranks of a TP group, or
// the replicas of a stage, run in-process): each member's call waits until every member has
// contributed under the same key, then all get the sum, added in member order 0, 1, … in
// float32, whatever order the calls came in.

import type { AllReduce } from '../all-reduce';

export class AllReduceError extends Error {
  override name = 'AllReduceError';
}

interface Round {
  readonly parts: (Float32Array | undefined)[];
  arrived: number;
  readonly waiters: { resolve: (sum: Float32Array) => void; reject: (err: Error) => void }[];
}

export class LocalGroup {
  private readonly rounds = new Map<string, Round>();

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new AllReduceError(`a group needs a positive size, got ${size}`);
  }

  /** The AllReduce member `index` calls. */
  member(index: number): AllReduce {
    if (!Number.isInteger(index) || index < 0 || index >= this.size)
      throw new AllReduceError(`member ${index} is outside 0..${this.size - 1}`);
    return (key, data) => this.contribute(index, key, data);
  }

  /** Keys some but not all members have contributed to. */
  pendingKeys(): string[] {
    return [...this.rounds.keys()];
  }

  private contribute(index: number, key: string, data: Float32Array): Promise<Float32Array> {
    let round = this.rounds.get(key);
    if (!round) {
      round = { parts: new Array(this.size).fill(undefined), arrived: 0, waiters: [] };
      this.rounds.set(key, round);
    }
    const r = round;
    return new Promise<Float32Array>((resolve, reject) => {
      if (r.parts[index]) return reject(new AllReduceError(`${key}: member ${index} contributed twice`));
      const other = r.parts.find((p) => p !== undefined);
      if (other && other.length !== data.length)
        return reject(
          new AllReduceError(`${key}: member ${index} contributed ${data.length} values, another ${other.length}`),
        );
      r.parts[index] = Float32Array.from(data);
      r.arrived++;
      r.waiters.push({ resolve, reject });
      if (r.arrived < this.size) return;
      this.rounds.delete(key);
      const sum = Float32Array.from(r.parts[0]!);
      for (let m = 1; m < this.size; m++) {
        const p = r.parts[m]!;
        for (let i = 0; i < sum.length; i++) sum[i] += p[i]!;
      }
      for (const w of r.waiters) w.resolve(Float32Array.from(sum));
    });
  }
}
