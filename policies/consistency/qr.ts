// Orthogonalization: thin Householder QR (exact orthonormal factor) and one
// Newton–Schulz step (cheap, approximate). Both act on row-major d×k blocks, d ≥ k.

import { LinalgError, Vec, checkSize, frobenius, mulAB, mulAtB } from './linalg';

/**
 * Orthonormal factor Q (d×k, row-major) of the thin Householder QR of A (d×k).
 * A column that is already in the span of the previous ones gets a reflector of
 * zero (H = I), so Q stays orthonormal; its column then completes the basis.
 */
export function householderQ(a: Vec, d: number, k: number): Float64Array {
  checkSize('householderQ', 'A', a, d, k);
  if (k > d) throw new LinalgError(`householderQ: cannot take ${k} orthonormal columns in dimension ${d}`);
  // Column-major working copy so each reflector touches contiguous memory.
  const w = new Float64Array(d * k);
  for (let i = 0; i < d; i++) for (let j = 0; j < k; j++) w[j * d + i] = a[i * k + j];
  const vs = new Float64Array(d * k); // reflector j stored at vs[j*d + j .. j*d + d)
  const active = new Uint8Array(k);
  let scale = 0;
  for (let i = 0; i < w.length; i++) scale = Math.max(scale, Math.abs(w[i]));
  const tiny = scale * 1e-300;
  for (let j = 0; j < k; j++) {
    const cj = j * d;
    let nx = 0;
    for (let i = j; i < d; i++) nx += w[cj + i] * w[cj + i];
    nx = Math.sqrt(nx);
    if (!(nx > tiny)) continue;
    const alpha = w[cj + j] >= 0 ? -nx : nx;
    let nv = 0;
    for (let i = j; i < d; i++) {
      const x = i === j ? w[cj + i] - alpha : w[cj + i];
      vs[cj + i] = x;
      nv += x * x;
    }
    nv = Math.sqrt(nv);
    for (let i = j; i < d; i++) vs[cj + i] /= nv;
    active[j] = 1;
    for (let c = j + 1; c < k; c++) reflect(w, c * d, vs, cj, j, d);
  }
  // Q = H_0 H_1 … H_{k−1} · I[:, :k], applied right to left.
  const q = new Float64Array(d * k);
  for (let j = 0; j < k; j++) q[j * d + j] = 1;
  for (let j = k - 1; j >= 0; j--) {
    if (!active[j]) continue;
    for (let c = j; c < k; c++) reflect(q, c * d, vs, j * d, j, d);
  }
  const out = new Float64Array(d * k);
  for (let i = 0; i < d; i++) for (let j = 0; j < k; j++) out[i * k + j] = q[j * d + i];
  return out;
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
