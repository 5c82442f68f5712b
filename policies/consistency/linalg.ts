// Dense row-major kernels for the small matrices of the consistency policies
// (d ≤ ~1024). Plain loops over typed arrays; the innermost loop always walks
// contiguous memory and allocates nothing. Accumulation order is fixed, so the same
// inputs give bitwise the same outputs.

import { seededUniform } from '../../base/seeded-uniform';

export type Vec = Float32Array | Float64Array;

export class LinalgError extends Error {
  override name = 'LinalgError';
}

export function checkSize(where: string, what: string, a: Vec, rows: number, cols: number): void {
  if (a.length !== rows * cols) {
    throw new LinalgError(`${where}: ${what} has ${a.length} elements, expected ${rows}×${cols} = ${rows * cols}`);
  }
}

/** out[at … at+n) += s · src[from … from+n). */
export function addScaled(out: Float64Array, at: number, s: number, src: Vec, from: number, n: number): void {
  for (let j = 0; j < n; j++) out[at + j] += s * src[from + j];
}

/** Σ a[i … i+n) · b[j … j+n), summed in index order. */
export function dot(a: Vec, i: number, b: Vec, j: number, n: number): number {
  let s = 0;
  for (let t = 0; t < n; t++) s += a[i + t] * b[j + t];
  return s;
}

/**
 * out (rows×q) = Σ_r A[i, r] · B[r, :] over r in index order, where A[i, r] is
 * a[i·rowStride + r·innerStride]: A itself (strides p, 1) or a transposed view (1, p).
 */
function mulRows(
  a: Vec,
  b: Vec,
  rows: number,
  inner: number,
  q: number,
  strides: [number, number],
  out: Float64Array,
): Float64Array {
  const [rowStride, innerStride] = strides;
  out.fill(0, 0, rows * q);
  for (let i = 0; i < rows; i++) {
    for (let r = 0; r < inner; r++) {
      const s = a[i * rowStride + r * innerStride];
      if (s !== 0) addScaled(out, i * q, s, b, r * q, q);
    }
  }
  return out;
}

/** out (m×q) = A (m×p) · B (p×q). */
export function mulAB(a: Vec, b: Vec, m: number, p: number, q: number, into?: Float64Array): Float64Array {
  return mulRows(a, b, m, p, q, [p, 1], into ?? new Float64Array(m * q));
}

/** out (p×q) = Aᵀ · B with A (m×p) and B (m×q). */
export function mulAtB(a: Vec, b: Vec, m: number, p: number, q: number, into?: Float64Array): Float64Array {
  return mulRows(a, b, p, m, q, [1, p], into ?? new Float64Array(p * q));
}

/** C (m×p) −= A (m×q) · Bᵀ with B (p×q): each entry is a contiguous dot product. */
export function subABt(c: Vec, a: Vec, b: Vec, m: number, p: number, q: number): void {
  for (let i = 0; i < m; i++) {
    const ai = i * q;
    const ci = i * p;
    for (let j = 0; j < p; j++) c[ci + j] -= dot(a, ai, b, j * q, q);
  }
}

export function frobenius(a: Vec): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * a[i];
  return Math.sqrt(s);
}

/**
 * A deterministic rows×cols block with entries uniform in [−1, 1): mulberry32 seeded
 * with `seed`. The same arguments always give the same block.
 */
export function pseudoRandomBlock(rows: number, cols: number, seed: number): Float64Array {
  const out = new Float64Array(rows * cols);
  const uniform = seededUniform(seed);
  for (let i = 0; i < out.length; i++) out[i] = uniform() * 2 - 1;
  return out;
}
