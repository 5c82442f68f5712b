// FRESCO (Lee & Lee, NeurIPS 2026) for linear layers Y = W X̄, W ∈ R^{dout×d},
// d = din + 1 with the bias as the last column (d = din for a layer without bias).
//
// Per layer, a basis store keyed by microbatch id — not a FIFO, because in an
// asynchronous pipeline microbatches may finish out of order:
//   onForward(layer, mb, X)   stores k1 = ⌈k/τ⌉ directions of the mb's X̄, where
//                             k = min(τn, ⌈α·min(dout, d)⌉) (n = the mb's rows);
//   onBackward(layer, mb)     drops them: the mb no longer needs protection;
//   buildProtectedBasis(l, k) merges the stored bases of the mbs still in flight into
//                             an orthonormal Q (d×k), see subspace.ts;
//   project(Δ, Q)             Δ' = Δ(I − QQᵀ), so Δ'X̄ ≈ 0 for the in-flight inputs.
// With k ≥ the rank of the in-flight X̄ the protection is exact: every in-flight mb
// sees the same layer outputs at its backward as at its forward.
//
// Does not model: embeddings and norms (never projected), attention's internal
// products (only the linear maps are protected), the error-feedback extension (§6.3).

import { LinalgError, Vec } from './linalg';
import { Basis, augment, extractBasis, mergeBases, project } from './subspace';

export { project } from './subspace';
export type { Basis, Xbar } from './subspace';
export { augment, extractBasis, mergeBases } from './subspace';
export { exactTopK, singularValues } from './exact';

export interface FrescoOptions {
  /** τ: microbatches in flight at this stage; sets k1 = ⌈k/τ⌉. */
  readonly tau: number;
  /** α: fraction of each layer's capacity min(dout, d) to protect, default 0.25. */
  readonly alpha?: number;
}

export class FrescoError extends Error {
  override name = 'FrescoError';
}

interface LayerStore {
  readonly dout: number;
  readonly din: number;
  readonly bias: boolean;
  readonly d: number;
  /** Insertion order = forward order, so merges are deterministic. */
  readonly bases: Map<number, Basis>;
  /** k computed at the latest forward (depends on n). */
  k: number;
}

export class Fresco {
  readonly tau: number;
  readonly alpha: number;
  private readonly layers = new Map<string, LayerStore>();

  constructor(opts: FrescoOptions) {
    if (!(Number.isInteger(opts.tau) && opts.tau >= 1)) throw new FrescoError(`fresco: tau must be an integer ≥ 1, got ${opts.tau}`);
    const alpha = opts.alpha ?? 0.25;
    if (!(alpha > 0 && alpha <= 1)) throw new FrescoError(`fresco: alpha must be in (0, 1], got ${alpha}`);
    this.tau = opts.tau;
    this.alpha = alpha;
  }

  addLayer(name: string, dout: number, din: number, bias = true): void {
    if (this.layers.has(name)) throw new FrescoError(`fresco: layer "${name}" added twice`);
    if (!(Number.isInteger(dout) && dout >= 1 && Number.isInteger(din) && din >= 1)) {
      throw new FrescoError(`fresco: layer "${name}" has bad shape dout=${dout}, din=${din}`);
    }
    this.layers.set(name, { dout, din, bias, d: bias ? din + 1 : din, bases: new Map(), k: 0 });
  }

  /** k = min(τn, ⌈α·min(dout, d)⌉). */
  protectedRank(layer: string, n: number, tau = this.tau): number {
    const l = this.layer(layer, 'protectedRank');
    return Math.min(tau * n, Math.ceil(this.alpha * Math.min(l.dout, l.d) - 1e-9));
  }

  /** Stores the basis of microbatch `mb`'s input X (n×din, row-major). */
  onForward(layer: string, mb: number, x: Vec, n: number, tau = this.tau): void {
    const l = this.layer(layer, 'onForward');
    const where = `fresco layer "${layer}", forward of mb ${mb}`;
    if (l.bases.has(mb)) throw new FrescoError(`${where}: mb ${mb} is already in flight here; in flight: [${[...l.bases.keys()].join(', ')}]`);
    if (!(Number.isInteger(n) && n >= 1) || x.length !== n * l.din) {
      throw new FrescoError(`${where}: input has ${x.length} elements, expected n×${l.din} with n=${n}`);
    }
    if (!(Number.isInteger(tau) && tau >= 1)) throw new FrescoError(`${where}: tau must be an integer ≥ 1, got ${tau}`);
    l.k = this.protectedRank(layer, n, tau);
    const k1 = Math.ceil(l.k / tau);
    const b = extractBasis(augment(x, n, l.din, l.bias), k1);
    l.bases.set(mb, { data: Float32Array.from(b.data), d: b.d, k: b.k });
  }

  onBackward(layer: string, mb: number): void {
    const l = this.layer(layer, 'onBackward');
    if (!l.bases.delete(mb)) {
      throw new FrescoError(`fresco layer "${layer}", backward of mb ${mb}: no forward basis for it; in flight: [${[...l.bases.keys()].join(', ')}]`);
    }
  }

  inFlight(layer: string): number[] {
    return [...this.layer(layer, 'inFlight').bases.keys()];
  }

  /** Orthonormal Q (d×k') with k' ≤ k, or null when no microbatch is in flight. */
  buildProtectedBasis(layer: string, k?: number): Basis | null {
    const l = this.layer(layer, 'buildProtectedBasis');
    if (l.bases.size === 0) return null;
    return mergeBases([...l.bases.values()], k ?? l.k);
  }

  /** Δ (dout×d, row-major) ← Δ(I − QQᵀ) for the layer's in-flight set; false when nothing is in flight. */
  projectUpdate(layer: string, delta: Vec, k?: number): boolean {
    const l = this.layer(layer, 'projectUpdate');
    if (delta.length !== l.dout * l.d) {
      throw new LinalgError(`fresco layer "${layer}": update has ${delta.length} elements, expected ${l.dout}×${l.d}`);
    }
    const q = this.buildProtectedBasis(layer, k);
    if (q === null) return false;
    project(delta, l.dout, q);
    return true;
  }

  layerShape(layer: string): { dout: number; din: number; d: number; bias: boolean } {
    const { dout, din, d, bias } = this.layer(layer, 'layerShape');
    return { dout, din, d, bias };
  }

  /** Bytes held by the stored per-microbatch bases. */
  extraStateBytes(): number {
    let b = 0;
    for (const l of this.layers.values()) for (const basis of l.bases.values()) b += basis.data.byteLength;
    return b;
  }

  private layer(name: string, where: string): LayerStore {
    const l = this.layers.get(name);
    if (l === undefined) throw new FrescoError(`fresco ${where}: unknown layer "${name}"; have [${[...this.layers.keys()].join(', ')}]`);
    return l;
  }
}
