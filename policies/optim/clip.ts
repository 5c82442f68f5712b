// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_: the L2 norm over
// all gradients together; if it exceeds maxNorm, every gradient is scaled in place by
// maxNorm / (norm + 1e-6). The norm is accumulated in float64 in a fixed order
// (the iteration order of `grads`), so it is deterministic.
//
// Unlike PyTorch's default, a non-finite norm throws: one NaN would otherwise poison
// every weight at the next update. The caller decides whether to skip the step.

import { ParamMap } from './params';

export class NonFiniteGradientError extends Error {
  override name = 'NonFiniteGradientError';
  constructor(
    readonly norm: number,
    readonly param: string,
  ) {
    super(`gradient clipping: total norm is ${norm}; first non-finite gradient in parameter "${param}"`);
  }
}

export interface ClipResult {
  /** Global norm before clipping. */
  readonly norm: number;
  /** Factor applied to every gradient (1 when not clipped). */
  readonly scale: number;
}

export function clipGradNorm(grads: ParamMap, maxNorm = 1.0): ClipResult {
  if (!(maxNorm > 0)) throw new RangeError(`gradient clipping: maxNorm must be > 0, got ${maxNorm}`);
  let sq = 0;
  for (const g of grads.values()) {
    for (let i = 0; i < g.length; i++) sq += g[i] * g[i];
  }
  const norm = Math.sqrt(sq);
  if (!Number.isFinite(norm)) {
    let bad = '?';
    for (const [name, g] of grads) {
      if (g.some((x) => !Number.isFinite(x))) {
        bad = name;
        break;
      }
    }
    throw new NonFiniteGradientError(norm, bad);
  }
  const coef = maxNorm / (norm + 1e-6);
  if (coef >= 1) return { norm, scale: 1 };
  for (const g of grads.values()) {
    for (let i = 0; i < g.length; i++) g[i] *= coef;
  }
  return { norm, scale: coef };
}
