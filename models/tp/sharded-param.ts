// A parameter of a tensor-parallel rank: either replicated (every rank holds the whole
// tensor) or one of T equal slices of the full tensor along an axis. A slice's values are
// cut from the same seeded full tensor TP = 1 initialises (seeded-init.ts), so the ranks
// together hold exactly the TP = 1 model; gathering the slices in rank order gives it back.

import type { InitKind } from '../seeded-init';
import { initValues } from '../seeded-init';

export interface ShardedParam {
  /** The full parameter's name, as in TP = 1 (`gpt.h0.attn.wq`). */
  readonly name: string;
  readonly fullShape: readonly number[];
  readonly init: InitKind;
  /** Absent: replicated. 1: columns (column-parallel weight); 0: rows (row-parallel weight, or a sliced bias). */
  readonly axis?: 0 | 1;
}

/** The shape rank-local `p` has with T ranks. */
export function localShape(p: ShardedParam, ranks: number): number[] {
  if (p.axis === undefined) return [...p.fullShape];
  const s = [...p.fullShape];
  s[p.axis] = s[p.axis]! / ranks;
  return s;
}

/** Rank `rank`'s slice of a full row-major tensor (1-D or 2-D). */
export function sliceFull(full: Float32Array, p: ShardedParam, rank: number, ranks: number): Float32Array {
  if (p.axis === undefined) return full;
  const [rows, cols = 1] = p.fullShape;
  if (p.axis === 0) {
    const n = (rows! / ranks) * cols;
    return full.slice(rank * n, (rank + 1) * n);
  }
  const w = cols / ranks;
  const out = new Float32Array(rows! * w);
  for (let i = 0; i < rows!; i++) out.set(full.subarray(i * cols + rank * w, i * cols + (rank + 1) * w), i * w);
  return out;
}

/** Rank `rank`'s initial values of `p`: its slice of the seeded full tensor. */
export function shardInit(seed: number, p: ShardedParam, rank: number, ranks: number): Float32Array {
  const size = p.fullShape.reduce((a, b) => a * b, 1);
  return sliceFull(initValues(seed, p.name, size, p.init), p, rank, ranks);
}

/** The full tensor from every rank's values of `p` (index = rank); replicated: rank 0's. */
export function gatherShards(p: ShardedParam, shards: readonly Float32Array[]): Float32Array {
  if (p.axis === undefined) return Float32Array.from(shards[0]!);
  const T = shards.length;
  const [rows, cols = 1] = p.fullShape;
  const out = new Float32Array(rows! * cols);
  if (p.axis === 0) {
    shards.forEach((s, r) => out.set(s, r * s.length));
    return out;
  }
  const w = cols / T;
  shards.forEach((s, r) => {
    for (let i = 0; i < rows!; i++) out.set(s.subarray(i * w, (i + 1) * w), i * cols + r * w);
  });
  return out;
}
