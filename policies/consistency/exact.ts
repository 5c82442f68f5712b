// Exact spectral tools for tests and measurements (not the production path): the
// symmetric eigen-decomposition by cyclic Jacobi rotations, the top-k left singular
// vectors of X̄ and its singular values. O(d³) per sweep; meant for d ≤ a few hundred.

import { LinalgError, mulAtB } from './linalg';
import { Basis, Xbar } from './subspace';

export interface Eigen {
  /** Eigenvalues, descending. */
  readonly values: Float64Array;
  /** d×d row-major; column j is the eigenvector of values[j]. */
  readonly vectors: Float64Array;
}

export function symmetricEigen(a: Float64Array, d: number): Eigen {
  if (a.length !== d * d) throw new LinalgError(`symmetricEigen: matrix has ${a.length} elements, expected ${d}×${d}`);
  const m = Float64Array.from(a);
  const v = new Float64Array(d * d);
  for (let i = 0; i < d; i++) v[i * d + i] = 1;
  let total = 0;
  for (let i = 0; i < m.length; i++) total += m[i] * m[i];
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < d; p++) for (let q = p + 1; q < d; q++) off += m[p * d + q] * m[p * d + q];
    if (off <= 1e-30 * total) break;
    for (let p = 0; p < d; p++) {
      for (let q = p + 1; q < d; q++) {
        const apq = m[p * d + q];
        if (apq === 0) continue;
        const theta = (m[q * d + q] - m[p * d + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < d; k++) {
          const mkp = m[k * d + p];
          const mkq = m[k * d + q];
          m[k * d + p] = c * mkp - s * mkq;
          m[k * d + q] = s * mkp + c * mkq;
        }
        for (let k = 0; k < d; k++) {
          const mpk = m[p * d + k];
          const mqk = m[q * d + k];
          m[p * d + k] = c * mpk - s * mqk;
          m[q * d + k] = s * mpk + c * mqk;
        }
        for (let k = 0; k < d; k++) {
          const vkp = v[k * d + p];
          const vkq = v[k * d + q];
          v[k * d + p] = c * vkp - s * vkq;
          v[k * d + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: d }, (_, i) => i).sort((i, j) => m[j * d + j] - m[i * d + i] || i - j);
  const values = new Float64Array(d);
  const vectors = new Float64Array(d * d);
  order.forEach((src, dst) => {
    values[dst] = m[src * d + src];
    for (let k = 0; k < d; k++) vectors[k * d + dst] = v[k * d + src];
  });
  return { values, vectors };
}

/** Top-k left singular vectors of X̄ (d×k, orthonormal), from the eigenvectors of X̄X̄ᵀ. */
export function exactTopK(xbar: Xbar, k: number): Basis {
  const { rows, n, d } = xbar;
  if (!(Number.isInteger(k) && k >= 1 && k <= d))
    throw new LinalgError(`exactTopK: k must be an integer in [1, ${d}], got ${k}`);
  const { vectors } = symmetricEigen(mulAtB(rows, rows, n, d, d), d);
  const data = new Float64Array(d * k);
  for (let i = 0; i < d; i++) for (let j = 0; j < k; j++) data[i * k + j] = vectors[i * d + j];
  return { data, d, k };
}

/** Singular values of X̄ (length d, descending; zeros past its rank up to rounding). */
export function singularValues(xbar: Xbar): Float64Array {
  const { rows, n, d } = xbar;
  const { values } = symmetricEigen(mulAtB(rows, rows, n, d, d), d);
  return values.map((x) => Math.sqrt(Math.max(x, 0)));
}
