// NAdamW: torch.optim.NAdam(decoupled_weight_decay=True), non-maximize. With ψ the
// momentum decay (0.004) and μ_t = β1(1 − ½·0.96^(tψ)):
//   t ← t+1;  Π ← Π·μ_t;  m ← m + (1−β1)(g − m);  v ← β2 v + (1−β2) g²
//   denom = √(v / (1−β2^t)) + ε
//   Δ = −lr·λ·p − lr(1−μ_t)/(1−Π) · g/denom − lr·μ_{t+1}/(1−Π·μ_{t+1}) · m/denom
// PyTorch keeps Π in a float32 0-d tensor; we round it to float32 after each product
// the same way. Moments are float32; elementwise arithmetic is float64, rounded once
// on store. Defaults follow the FRESCO runs: β1 0.99, β2 0.999, ε 1e-8, λ 0.01.

import { OptimizerState } from './optimizer';
import { AdamFamilyOptions, MomentOptimizer, Slot, checkRange } from './moments';
import { ParamError, ParamInfo } from './params';

export interface NAdamWOptions extends AdamFamilyOptions {
  /** ψ, default 0.004 (PyTorch's momentum_decay). */
  readonly momentumDecay?: number;
}

export class NAdamW extends MomentOptimizer {
  readonly kind = 'nadamw' as const;
  readonly momentumDecay: number;
  private muProduct = 1;
  private gradCoef = 0;
  private momCoef = 0;
  private bc2 = 1;

  constructor(params: readonly ParamInfo[], opts: NAdamWOptions = {}) {
    super(params, opts, 0.99);
    this.momentumDecay = checkRange('NAdamW', 'momentumDecay', opts.momentumDecay ?? 0.004, 0, Infinity, false);
  }

  /** μ_t = β1(1 − ½·0.96^(tψ)). */
  mu(t: number): number {
    return this.beta1 * (1 - 0.5 * 0.96 ** (t * this.momentumDecay));
  }

  protected beginStep(t: number): void {
    const mu = this.mu(t);
    const muNext = this.mu(t + 1);
    this.muProduct = Math.fround(this.muProduct * mu);
    this.bc2 = 1 - this.beta2 ** t;
    // Per unit lr; the lr multiplies in updateSlot.
    this.gradCoef = (1 - mu) / (1 - this.muProduct);
    this.momCoef = muNext / (1 - this.muProduct * muNext);
  }

  protected updateSlot(s: Slot, p: Float32Array, g: Float32Array, lr: number): void {
    const cg = lr * this.gradCoef;
    const cm = lr * this.momCoef;
    const { bc2, eps } = this;
    this.advanceMoments(s, g, lr, (i, gi, mi, vi, decay) => {
      const denom = Math.sqrt(vi / bc2) + eps;
      return -decay * p[i] - (cg * gi) / denom - (cm * mi) / denom;
    });
  }

  /** The next step's Δ/(−lr) with the unknown next gradient replaced by m (so m stays m). */
  direction(name: string, param: Float32Array, out: Float32Array): void {
    const s = this.slot(name, 'direction');
    if (this.t === 0) {
      out.fill(0);
      return;
    }
    const t1 = this.t + 1;
    const mu1 = this.mu(t1);
    const mu2 = this.mu(t1 + 1);
    const prod1 = Math.fround(this.muProduct * mu1);
    const coef = (1 - mu1) / (1 - prod1) + mu2 / (1 - prod1 * mu2);
    const bc2 = 1 - this.beta2 ** this.t;
    const lam = s.decay ? this.weightDecay : 0;
    for (let i = 0; i < s.size; i++) {
      out[i] = (coef * s.m[i]) / (Math.sqrt(s.v[i] / bc2) + this.eps) + lam * param[i];
    }
  }

  protected override extraState(): { muProduct: number } {
    return { muProduct: this.muProduct };
  }

  protected override loadExtra(state: OptimizerState): void {
    const mp = state.muProduct;
    if (mp === undefined || !(mp > 0 && mp <= 1)) throw new ParamError(`nadamw load: bad muProduct ${mp}`);
    this.muProduct = mp;
  }
}
