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
//   project(Δ, Q)             Δ' = Δ(I − QQᵀ), so Δ'X̄ ≈ 0 for the in-flight inputs;
//   projectLayerUpdate(...)   the same, in place on the layer's own weight and bias
//                             tensors in any of the three layouts (projectInPlace).
// The protection is exact (every in-flight mb sees the same layer outputs at its backward
// as at its forward) when each in-flight mb's X̄ has rank at most k1, so that its basis
// spans it, and k covers the merged bases. A microbatch of more rows keeps only its k1
// dominant directions; with fewer than τ in flight the unused share of k is not passed on.
//
// Memory (extraStateBytes): the per-microbatch bases of the microbatches in flight,
// Σ over layers and in-flight mbs of d·min(k1, n, d)·4 bytes (Float32, k1 from the
// mb's forward), plus one Float64 scratch shared by all layers, kept for the object's
// lifetime and sized to the largest min(PROJECTION_BLOCK_ROWS, dout)·k any projection
// has needed so far. Nothing of size dout×d is ever allocated. Transient buffers
// freed when the call returns are not counted: at a forward, augment's X̄ (n×d
// Float64) and extractBasis's d×k1 blocks; at an update, mergeBases' C (d×τk1), Z
// (d×k) and the protected basis Q (d×k, Float64), which is rebuilt for every update.
//
// Does not model: embeddings and norms (never projected; FrescoPolicy hands a backward
// the values its forward saw), attention's internal products (only the linear maps are
// protected), the error-feedback extension (§6.3).

import { LinalgError, Vec, addScaled, dot } from './linalg';
import { Basis, augment, extractBasis, mergeBases } from './subspace';

export { project } from './subspace';
export type { Basis, Xbar } from './subspace';
export { augment, extractBasis, mergeBases } from './subspace';
export { exactTopK, singularValues } from './exact';

/** How a linear layer's parameters are stored (see fresco-policy.ts). */
export type WeightLayout = 'augmented' | 'out-in' | 'in-out';

/** Output rows projected together; the scratch is this many rows × k Float64s. */
export const PROJECTION_BLOCK_ROWS = 16;

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
  /** G for one block of output rows, shared by all layers; grows to the largest need. */
  private scratch = new Float64Array(0);

  constructor(opts: FrescoOptions) {
    if (!(Number.isInteger(opts.tau) && opts.tau >= 1))
      throw new FrescoError(`fresco: tau must be an integer ≥ 1, got ${opts.tau}`);
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
    if (l.bases.has(mb))
      throw new FrescoError(
        `${where}: mb ${mb} is already in flight here; in flight: [${[...l.bases.keys()].join(', ')}]`,
      );
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
      throw new FrescoError(
        `fresco layer "${layer}", backward of mb ${mb}: no forward basis for it; in flight: [${[...l.bases.keys()].join(', ')}]`,
      );
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
    return this.projectLayerUpdate(layer, 'augmented', delta, undefined, k);
  }

  /**
   * In place: the bias-augmented Δ̄ (dout×d) of `weight` (and `bias`, for the 'out-in'
   * and 'in-out' layouts of a layer added with a bias) ← Δ̄(I − QQᵀ) for the layer's
   * in-flight set. Needs only the shared block scratch. False when nothing is in flight.
   */
  projectLayerUpdate(layer: string, layout: WeightLayout, weight: Vec, bias?: Vec, k?: number): boolean {
    const l = this.layer(layer, 'projectLayerUpdate');
    const where = `fresco layer "${layer}", ${layout} update`;
    if (layout === 'augmented') {
      if (bias !== undefined)
        throw new FrescoError(
          `${where}: the bias is the weight's last column; got a separate bias of ${bias.length} elements`,
        );
      if (weight.length !== l.dout * l.d)
        throw new LinalgError(`${where}: weight has ${weight.length} elements, expected ${l.dout}×${l.d}`);
    } else {
      if (weight.length !== l.dout * l.din)
        throw new LinalgError(`${where}: weight has ${weight.length} elements, expected ${l.dout}×${l.din}`);
      if ((bias !== undefined) !== l.bias) {
        throw new FrescoError(
          `${where}: layer was added ${l.bias ? 'with' : 'without'} a bias, got ${bias === undefined ? 'none' : `one of ${bias.length} elements`}`,
        );
      }
      if (bias !== undefined && bias.length !== l.dout)
        throw new LinalgError(`${where}: bias has ${bias.length} elements, expected ${l.dout}`);
    }
    const q = this.buildProtectedBasis(layer, k);
    if (q === null) return false;
    const need = Math.min(PROJECTION_BLOCK_ROWS, l.dout) * q.k;
    if (this.scratch.length < need) this.scratch = new Float64Array(need);
    projectInPlace(layout, weight, bias, l.dout, q, this.scratch);
    return true;
  }

  layerShape(layer: string): { dout: number; din: number; d: number; bias: boolean } {
    const { dout, din, d, bias } = this.layer(layer, 'layerShape');
    return { dout, din, d, bias };
  }

  /** Bytes held between calls: the in-flight mbs' bases and the projection scratch (see the header). */
  extraStateBytes(): number {
    let b = this.scratch.byteLength;
    for (const l of this.layers.values()) for (const basis of l.bases.values()) b += basis.data.byteLength;
    return b;
  }

  private layer(name: string, where: string): LayerStore {
    const l = this.layers.get(name);
    if (l === undefined)
      throw new FrescoError(`fresco ${where}: unknown layer "${name}"; have [${[...this.layers.keys()].join(', ')}]`);
    return l;
  }
}

/**
 * In place: Δ̄ ← Δ̄ − GQᵀ with G = Δ̄Q, where Δ̄ (dout×d) is read straight from the
 * layer's tensors: 'augmented' weight dout×d; 'out-in' weight dout×din; 'in-out'
 * weight din×dout; for the last two the bias (dout) is column din of Δ̄ and d = din+1
 * (d = din without a bias). G is formed PROJECTION_BLOCK_ROWS output rows at a time
 * in `scratch`. Each entry is accumulated in the same order as project() on the
 * gathered Δ̄ (G over i ascending, then a dot over c), so the result is bitwise the same.
 */
export function projectInPlace(
  layout: WeightLayout,
  weight: Vec,
  bias: Vec | undefined,
  dout: number,
  q: Basis,
  scratch: Float64Array,
): void {
  const d = q.d,
    k = q.k,
    qd = q.data;
  const din = layout === 'augmented' || bias === undefined ? d : d - 1;
  if (weight.length !== dout * din) {
    throw new LinalgError(
      `projectInPlace: ${layout} weight has ${weight.length} elements, expected ${dout}×${din} for Q of ${d} rows${bias === undefined ? '' : ' and a bias'}`,
    );
  }
  if (bias !== undefined && (layout === 'augmented' || bias.length !== dout)) {
    throw new LinalgError(`projectInPlace: bias of ${bias.length} elements for a ${layout} weight with dout=${dout}`);
  }
  const rows = Math.min(PROJECTION_BLOCK_ROWS, dout);
  if (scratch.length < rows * k)
    throw new LinalgError(`projectInPlace: scratch has ${scratch.length} elements, needs ${rows}×${k}`);
  // Δ̄[o, i] = weight[o·so + i·si] for i < din.
  const so = layout === 'in-out' ? 1 : din;
  const si = layout === 'in-out' ? dout : 1;
  for (let o0 = 0; o0 < dout; o0 += rows) {
    const m = Math.min(rows, dout - o0);
    scratch.fill(0, 0, m * k);
    for (let i = 0; i < din; i++) {
      const qi = i * k;
      for (let r = 0; r < m; r++) {
        const s = weight[(o0 + r) * so + i * si];
        if (s !== 0) addScaled(scratch, r * k, s, qd, qi, k);
      }
    }
    if (bias !== undefined) {
      const qi = din * k;
      for (let r = 0; r < m; r++) {
        const s = bias[o0 + r];
        if (s !== 0) addScaled(scratch, r * k, s, qd, qi, k);
      }
    }
    for (let i = 0; i < din; i++) {
      const qi = i * k;
      for (let r = 0; r < m; r++) weight[(o0 + r) * so + i * si] -= dot(scratch, r * k, qd, qi, k);
    }
    if (bias !== undefined) {
      const qi = din * k;
      for (let r = 0; r < m; r++) bias[o0 + r] -= dot(scratch, r * k, qd, qi, k);
    }
  }
}
