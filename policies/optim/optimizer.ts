// The seam between an optimizer and whoever applies its updates (the parameter store).
//
// An optimizer *proposes* an update Δ per parameter (weight decay included) and
// advances its own moments, but never writes the parameters: a consistency policy may
// transform Δ first (FRESCO projects it, PipeMare damps it), then the caller applies
// it with `applyUpdates`. It also exposes its current direction for weight prediction.

import { ParamInfo, ParamMap } from './params';

export interface Optimizer {
  readonly kind: 'adamw' | 'nadamw';
  /** Number of proposals made so far (PyTorch's `state['step']`). */
  readonly step: number;
  readonly params: readonly ParamInfo[];
  /**
   * Advances the moments with `grads` and returns Δ for every parameter, so that
   * `params + Δ` is what PyTorch's `step()` would leave. `params` are read, never
   * written. The returned arrays are owned by the optimizer and overwritten by the
   * next call: apply or copy them before proposing again.
   */
  propose(params: ParamMap, grads: ParamMap, lr: number): Map<string, Float32Array>;
  /**
   * Writes into `out` the update per unit learning rate that the next step would make
   * if the next gradient equalled the current first moment, with the sign of a descent
   * direction: next Δ ≈ −lr · direction. Includes decoupled weight decay (λ·param).
   * Zero before the first step.
   */
  direction(name: string, param: Float32Array, out: Float32Array): void;
  /** Serializable snapshot (copies); `load` restores it bit for bit. */
  state(): OptimizerState;
  load(state: OptimizerState): void;
  /** Bytes held by the moments. */
  stateBytes(): number;
}

export interface OptimizerState {
  readonly kind: 'adamw' | 'nadamw';
  readonly step: number;
  /** NAdam only: ∏ μ_i so far, rounded to float32 as PyTorch keeps it. */
  readonly muProduct?: number;
  readonly m: Record<string, Float32Array>;
  readonly v: Record<string, Float32Array>;
}
