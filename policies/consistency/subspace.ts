// FRESCO's subspace math (paper §3.3 and appendix C.3), pure functions over
// Float64Array blocks:
//   extractBasis  one block power-iteration step X̄X̄ᵀV0 from a fixed pseudo-random
//                 V0, then one Newton–Schulz step (qr.ts documents the polynomial);
//   mergeBases    concatenates per-microbatch bases C = [B_1 … B_τ] and keeps k
//                 dominant directions: Z = qr(C·S) (fixed pseudo-random S), then two
//                 power steps Z ← qr(C(CᵀZ)) (appendix C.3, T_c = 2). When C has no
//                 more than k columns there is nothing to reduce and Q = qr(C) (exact
//                 span). Each qr drops numerically dependent columns, so Q never holds
//                 an arbitrary direction (identical microbatches protect their span once);
//   project       Δ ← Δ − (ΔQ)Qᵀ, never forming the d×d projector.
//
// Layout: X̄ is passed transposed, as `rows` (n×d row-major, one augmented sample
// [x; 1] per row), the natural layout of a layer's input activations.

import { LinalgError, Vec, checkSize, mulAB, mulAtB, pseudoRandomBlock, subABt } from './linalg';
import { newtonSchulzStep, orthonormalSpan } from './qr';

/** X̄ᵀ: n samples × d features, row-major; with a bias the last column is all ones. */
export interface Xbar {
  readonly rows: Float64Array;
  readonly n: number;
  readonly d: number;
}

/** A d×k block of column directions, row-major. */
export interface Basis {
  readonly data: Vec;
  readonly d: number;
  readonly k: number;
}

const V0_SEED = 0x5eed0001;
const MERGE_SEED = 0x5eed0002;

/** X̄ᵀ from a layer input X (n×din row-major), with a ones column appended when `bias`. */
export function augment(x: Vec, n: number, din: number, bias = true): Xbar {
  checkSize('augment', 'X', x, n, din);
  const d = bias ? din + 1 : din;
  const rows = new Float64Array(n * d);
  for (let r = 0; r < n; r++) {
    for (let i = 0; i < din; i++) rows[r * d + i] = x[r * din + i];
    if (bias) rows[r * d + din] = 1;
  }
  return { rows, n, d };
}

/**
 * About the leading k1 left singular directions of X̄ (d×k1). The block is capped at
 * min(k1, n, d) columns: X̄ has no more independent directions than that.
 */
export function extractBasis(xbar: Xbar, k1: number): Basis {
  const { rows, n, d } = xbar;
  if (!(Number.isInteger(k1) && k1 >= 1)) throw new LinalgError(`extractBasis: k1 must be an integer ≥ 1, got ${k1}`);
  const k = Math.min(k1, n, d);
  const v0 = pseudoRandomBlock(d, k, V0_SEED);
  const t = mulAB(rows, v0, n, d, k); // X̄ᵀV0, n×k
  const y = mulAtB(rows, t, n, d, k); // X̄X̄ᵀV0, d×k
  return { data: newtonSchulzStep(y, d, k), d, k };
}

/** Orthonormal Q (d×min(k, total columns)) spanning the dominant directions of the bases. */
export function mergeBases(bases: readonly Basis[], k: number): Basis {
  if (bases.length === 0) throw new LinalgError('mergeBases: no bases to merge');
  const d = bases[0].d;
  let m = 0;
  for (const b of bases) {
    if (b.d !== d) throw new LinalgError(`mergeBases: basis of dimension ${b.d} among bases of dimension ${d}`);
    m += b.k;
  }
  if (!(Number.isInteger(k) && k >= 1 && k <= d))
    throw new LinalgError(`mergeBases: k must be an integer in [1, ${d}], got ${k}`);
  const c = new Float64Array(d * m); // C = [B_1 … B_τ], d×m
  let off = 0;
  for (const b of bases) {
    for (let i = 0; i < d; i++) for (let j = 0; j < b.k; j++) c[i * m + off + j] = b.data[i * b.k + j];
    off += b.k;
  }
  if (m <= k) return { ...orthonormalSpan(c, d, m), d };
  let z = orthonormalSpan(mulAB(c, pseudoRandomBlock(m, k, MERGE_SEED), d, m, k), d, k);
  for (let step = 0; step < 2; step++) {
    const ctz = mulAtB(c, z.data, d, m, z.k);
    z = orthonormalSpan(mulAB(c, ctz, d, m, z.k), d, z.k);
  }
  return { ...z, d };
}

/**
 * In place: Δ (dout×d, row-major) ← Δ(I − QQᵀ) = Δ − (ΔQ)Qᵀ. Q must have
 * orthonormal columns. `scratch` (dout×k) avoids an allocation when given.
 */
export function project(delta: Vec, dout: number, q: Basis, scratch?: Float64Array): void {
  checkSize('project', 'Δ', delta, dout, q.d);
  const p = mulAB(delta, q.data, dout, q.d, q.k, scratch && scratch.length >= dout * q.k ? scratch : undefined);
  subABt(delta, p, q.data, dout, q.d, q.k);
}
