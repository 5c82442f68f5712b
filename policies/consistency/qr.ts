// Orthogonalization: thin Householder QR (exact orthonormal factor) and one
// Newton–Schulz step (cheap, approximate). Both act on row-major d×k blocks, d ≥ k.

import { LinalgError, Vec, checkSize, frobenius, mulAB, mulAtB } from './linalg';

/**
 * Orthonormal factor Q (d×k, row-major) of the thin Householder QR of A (d×k).
 * A column that is already in the span of the previous ones gets a reflector of
 * zero (H = I), so Q stays orthonormal; its column then completes the basis.
 */
export function householderQ(a: Vec, d: number, k: number): Float64Array {
  return householder(a, d, k, null).data;
}

/**
 * An orthonormal basis (d×r, row-major) of the span of A's columns: Householder QR that
 * skips a column whose part outside the span of the columns before it is below `relTol`
 * times the largest column norm, so r is A's numerical rank and no column of the result
 * is an arbitrary completion.
 */
export function orthonormalSpan(a: Vec, d: number, k: number, relTol = 1e-9): { data: Float64Array; k: number } {
  if (!(relTol >= 0 && relTol < 1)) throw new LinalgError(`orthonormalSpan: relTol must be in [0, 1), got ${relTol}`);
  return householder(a, d, k, relTol);
}

/** Householder QR of A; with `relTol` null every column keeps its place (householderQ), else dependent columns are dropped. */
function householder(a: Vec, d: number, k: number, relTol: number | null): { data: Float64Array; k: number } {
  checkSize('householderQ', 'A', a, d, k);
  if (k > d) throw new LinalgError(`householderQ: cannot take ${k} orthonormal columns in dimension ${d}`);
  // Column-major working copy so each reflector touches contiguous memory.
  const w = new Float64Array(d * k);
  for (let i = 0; i < d; i++) for (let j = 0; j < k; j++) w[j * d + i] = a[i * k + j];
  const vs = new Float64Array(d * k); // reflector r stored at vs[r*d + r .. r*d + d)
  const active = new Uint8Array(k);
  let tiny: number;
  if (relTol === null) {
    let scale = 0;
    for (let i = 0; i < w.length; i++) scale = Math.max(scale, Math.abs(w[i]));
    tiny = scale * 1e-300;
  } else {
    let largest = 0;
    for (let j = 0; j < k; j++) {
      let n = 0;
      for (let i = 0; i < d; i++) n += w[j * d + i] * w[j * d + i];
      largest = Math.max(largest, Math.sqrt(n));
    }
    tiny = largest * relTol;
  }
  // r: the row where the next reflector starts. Dropping a column keeps r, so the
  // reflectors stay a QR of the independent columns.
  let r = 0;
  for (let j = 0; j < k; j++) {
    const cj = j * d;
    let nx = 0;
    for (let i = r; i < d; i++) nx += w[cj + i] * w[cj + i];
    nx = Math.sqrt(nx);
    if (!(nx > tiny)) {
      if (relTol === null) r++;
      continue;
    }
    const alpha = w[cj + r] >= 0 ? -nx : nx;
    const vr = r * d;
    let nv = 0;
    for (let i = r; i < d; i++) {
      const x = i === r ? w[cj + i] - alpha : w[cj + i];
      vs[vr + i] = x;
      nv += x * x;
    }
    nv = Math.sqrt(nv);
    for (let i = r; i < d; i++) vs[vr + i] /= nv;
    active[r] = 1;
    for (let c = j + 1; c < k; c++) reflect(w, c * d, vs, vr, r, d);
    r++;
  }
  // Q = H_0 H_1 … H_{r−1} · I[:, :r], applied right to left.
  const q = new Float64Array(d * r);
  for (let j = 0; j < r; j++) q[j * d + j] = 1;
  for (let j = r - 1; j >= 0; j--) {
    if (!active[j]) continue;
    for (let c = j; c < r; c++) reflect(q, c * d, vs, j * d, j, d);
  }
  const out = new Float64Array(d * r);
  for (let i = 0; i < d; i++) for (let j = 0; j < r; j++) out[i * r + j] = q[j * d + i];
  return { data: out, k: r };
}

/** x ← (I − 2vvᵀ)x on rows from..d of the column at xOff, v at vOff. */
function reflect(x: Float64Array, xOff: number, v: Float64Array, vOff: number, from: number, d: number): void {
  let s = 0;
  for (let i = from; i < d; i++) s += v[vOff + i] * x[xOff + i];
  s *= 2;
  for (let i = from; i < d; i++) x[xOff + i] -= s * v[vOff + i];
}

/**
 * One Newton–Schulz orthogonalization step on Y (d×k), returned as a new array:
 * Y is first scaled by 1/‖Y‖_F (so every singular value s lies in (0, 1], inside the
 * cubic's convergence region (0, √3)), then Y ← 1.5·Y − 0.5·Y(YᵀY), which maps each
 * singular value s to 1.5s − 0.5s³ (monotone on [0, 1], fixed point 1) and keeps the
 * singular vectors, hence the span. One step does not make the columns orthonormal;
 * it evens them out while keeping the ordering of their weights.
 */
export function newtonSchulzStep(y: Vec, d: number, k: number): Float64Array {
  checkSize('newtonSchulzStep', 'Y', y, d, k);
  const f = frobenius(y);
  const ys = new Float64Array(d * k);
  if (f === 0) return ys;
  for (let i = 0; i < ys.length; i++) ys[i] = y[i] / f;
  const g = mulAtB(ys, ys, d, k, k); // k×k
  const yg = mulAB(ys, g, d, k, k);
  for (let i = 0; i < ys.length; i++) ys[i] = 1.5 * ys[i] - 0.5 * yg[i];
  return ys;
}
