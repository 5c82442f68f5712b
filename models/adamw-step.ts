// The optimizer step of synchronous training, shared by the stage computes
// (compute/chunk-optimizer.ts), the non-pipelined reference and the compute profile:
// AdamW with a microbatch-ordered gradient sum, written into a module's variables.
// Natively when the active backend has the native optimizer (models/native-adamw.ts:
// in place on the backend's memory, bitwise the JS result), else in JS: the parameters
// copied out, Δ proposed and added, the new values copied back in.

import * as tf from '@tensorflow/tfjs';
import { AdamW, AdamWKernel } from '../policies/optim/adamw';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { OptimAddon, adamwInto, nativeAdamW } from './native-adamw';
import { assignValues, readFloat32 } from './tensor-io';

/** One AdamW step of `vars`, named `names` as `opt` knows them, with `sum`'s gradients at learning rate `lr`. */
export function stepVariables(
  vars: readonly tf.Variable[],
  names: readonly string[],
  opt: AdamW,
  sum: OrderedSum,
  lr: number,
): void {
  const o = nativeAdamW();
  const kernels = o ? nativeKernels(o, vars, names, sum.partials()) : null;
  if (kernels) {
    opt.stepWith(lr, kernels);
    return;
  }
  const grads = sum.result();
  const params = new Map(vars.map((v, i) => [names[i], readFloat32(v)]));
  const delta = opt.propose(params, new Map(names.map((n, i) => [n, grads[i]])), lr);
  vars.forEach((v, i) => {
    const p = params.get(names[i])!;
    const d = delta.get(names[i])!;
    for (let j = 0; j < p.length; j++) p[j] += d[j];
    assignValues(v, p);
  });
}

/** The native step's kernel per parameter name, or null when one variable's data is not in reach (then JS steps them all). */
function nativeKernels(
  o: OptimAddon,
  vars: readonly tf.Variable[],
  names: readonly string[],
  sums: readonly Float64Array[],
): Map<string, AdamWKernel> | null {
  const out = new Map<string, AdamWKernel>();
  for (let i = 0; i < vars.length; i++) {
    const g = sums[i];
    const k = g && g.length === vars[i].size ? adamwInto(o, vars[i], g) : null;
    if (!k) return null;
    out.set(names[i], k);
  }
  return out;
}
