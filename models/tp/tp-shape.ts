// Which tensor-parallel widths T a model can be split into: the GPT splits its attention
// heads (and so its width and 4x MLP) across ranks, the MLP LM its blocks' hidden width.
// A T that does not divide them is refused before anything starts, naming the numbers
// and the nearest T that would work.

import { InputError } from '../../base/errors';
import type { TrainConfig } from '../train-config';

export class TensorParallelShapeError extends InputError {
  override name = 'TensorParallelShapeError';
}

/** Divisors of n, ascending. */
function divisors(n: number): number[] {
  const out: number[] = [];
  for (let d = 1; d <= n; d++) if (n % d === 0) out.push(d);
  return out;
}

/** The divisor of n nearest to t (the smaller one on a tie). */
export function nearestDivisor(n: number, t: number): number {
  let best = 1;
  for (const d of divisors(n)) if (Math.abs(d - t) < Math.abs(best - t)) best = d;
  return best;
}

/** What a model splits across T ranks: the GPT's heads, the MLP LM's hidden width. */
export interface TpSplitDims {
  readonly model: 'gpt' | 'mlp';
  /** gpt: attention heads. */
  readonly heads: number;
  /** Residual width (the flag --width). */
  readonly width: number;
  /** mlp: each block's hidden width (4 × width in a training config). */
  readonly hidden: number;
}

/** Throws TensorParallelShapeError (exit 2) unless the model can be split into `ranks` equal slices. */
export function checkTensorParallel(d: TpSplitDims, ranks: number): void {
  if (!Number.isInteger(ranks) || ranks < 1)
    throw new TensorParallelShapeError(`--tp must be a positive integer, got ${ranks}`);
  if (d.model === 'gpt') {
    const valid = `the nearest valid --tp is ${nearestDivisor(d.heads, ranks)} (divisors of ${d.heads}: ${divisors(d.heads).join(', ')})`;
    if (ranks > d.heads)
      throw new TensorParallelShapeError(
        `gpt: --tp ${ranks} is larger than the ${d.heads} attention heads (--heads ${d.heads}); each rank needs at least one head; ${valid}`,
      );
    if (d.heads % ranks !== 0)
      throw new TensorParallelShapeError(
        `gpt: --heads ${d.heads} is not divisible by --tp ${ranks}, so the heads cannot be split evenly across ranks; ${valid}`,
      );
    return;
  }
  if (d.hidden % ranks !== 0) {
    const near = nearestDivisor(d.hidden, ranks);
    throw new TensorParallelShapeError(
      `mlp: the blocks' hidden width ${d.hidden}${d.hidden === 4 * d.width ? ` (4 × --width ${d.width})` : ''} is not divisible by --tp ${ranks}; the nearest valid --tp is ${near}`,
    );
  }
}

/** checkTensorParallel for a training config (the model and sizes its flags give). */
export function checkTrainTensorParallel(t: TrainConfig, ranks: number): void {
  checkTensorParallel({ model: t.model, heads: t.heads, width: t.width, hidden: 4 * t.width }, ranks);
}
