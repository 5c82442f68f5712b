// AdamW with PyTorch semantics (torch.optim.AdamW, non-amsgrad, non-maximize):
//   t ← t+1;  m ← m + (1−β1)(g − m);  v ← β2 v + (1−β2) g²
//   Δ = −lr·λ·p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
// Moments are float32 like PyTorch's fp32 state; each element's arithmetic is done in
// float64 and rounded once on store, so results agree with PyTorch to float32
// rounding, not bit for bit. Proposes Δ; never writes the parameters (see optimizer.ts).

import { AdamFamilyOptions, MomentOptimizer, Slot, checkRange } from './moments';
import { ParamError, ParamInfo } from './params';

/** One step's scalars for one parameter, as a kernel computing updateSlot's arithmetic takes them (native/optim.c). */
export interface AdamWScalars {
  readonly w1: number;
  readonly b2: number;
  readonly w2: number;
  readonly eps: number;
  /** lr / (1 − β1^t). */
  readonly step: number;
  /** √(1 − β2^t). */
  readonly bc2Sqrt: number;
  /** lr·λ, or 0 for a parameter without weight decay. */
  readonly decay: number;
}

/** Advances m and v in place and applies the step to its parameter itself. */
export type AdamWKernel = (m: Float32Array, v: Float32Array, k: AdamWScalars) => void;

export class AdamW extends MomentOptimizer {
  readonly kind = 'adamw' as const;
  private stepSize = 0;
  private bc2Sqrt = 1;

  constructor(params: readonly ParamInfo[], opts: AdamFamilyOptions = {}) {
    super(params, opts, 0.9);
  }

  protected beginStep(t: number): void {
    this.stepSize = 1 / (1 - this.beta1 ** t);
    this.bc2Sqrt = Math.sqrt(1 - this.beta2 ** t);
  }

  protected updateSlot(s: Slot, p: Float32Array, g: Float32Array, lr: number): void {
    const step = lr * this.stepSize;
    const { bc2Sqrt, eps } = this;
    this.advanceMoments(
      s,
      g,
      lr,
      (i, _gi, mi, vi, decay) => -decay * p[i] - (step * mi) / (Math.sqrt(vi) / bc2Sqrt + eps),
    );
  }

  /**
   * One step with a kernel per parameter in place of propose (the caller applies no Δ: the
   * kernel writes the parameter). Every parameter needs its kernel; checked, with lr,
   * before any state changes.
   */
  stepWith(lr: number, kernels: ReadonlyMap<string, AdamWKernel>): void {
    const where = `${this.kind} step ${this.t + 1}`;
    checkRange(where, 'lr', lr, 0, Infinity, false);
    for (const name of this.slots.keys())
      if (!kernels.has(name)) throw new ParamError(`${where}: no kernel for parameter "${name}"`);
    this.t += 1;
    this.beginStep(this.t);
    const w1 = 1 - this.beta1;
    const w2 = 1 - this.beta2;
    const step = lr * this.stepSize;
    for (const s of this.slots.values()) {
      const decay = s.decay ? lr * this.weightDecay : 0;
      const k = { w1, b2: this.beta2, w2, eps: this.eps, step, bc2Sqrt: this.bc2Sqrt, decay };
      kernels.get(s.info.name)!(s.m, s.v, k);
    }
  }

  direction(name: string, param: Float32Array, out: Float32Array): void {
    const s = this.slot(name, 'direction');
    if (this.t === 0) {
      out.fill(0);
      return;
    }
    const bc1 = 1 - this.beta1 ** this.t;
    const bc2Sqrt = Math.sqrt(1 - this.beta2 ** this.t);
    const lam = s.decay ? this.weightDecay : 0;
    for (let i = 0; i < s.size; i++) {
      out[i] = s.m[i] / bc1 / (Math.sqrt(s.v[i]) / bc2Sqrt + this.eps) + lam * param[i];
    }
  }
}
