// Fused ops: LayerNorm, GELU and the causal softmax of attention as one native kernel
// each, forward and backward (native/fused.c through models/fused-kernel-funcs.ts),
// where tfjs composes each from 5–25 kernels. models/native-kernels.ts registers the
// kernels on the wasm or cpu backend when the addon loads; their gradients are
// registered with tfjs once, so they are taped like any kernel (kept tapes and split
// backwards included: a LayerNorm's dx and its dg, db are separate gradient closures).
// The op functions return null when the active backend has no fused kernels or the
// tensors are not ones they handle; models/layers.ts then composes the same math from
// tfjs ops (the fallback, and the 'tfjs' and 'sgemm' kernel sets).

import * as tf from '@tensorflow/tfjs';
import { Addon } from './native-kernel-funcs';
import {
  causalSoftmaxGradKernel,
  causalSoftmaxKernel,
  geluGradKernel,
  geluKernel,
  layerNormGradParamsKernel,
  layerNormGradXKernel,
  layerNormKernel,
} from './fused-kernel-funcs';

const MAKERS = {
  BatonLayerNorm: layerNormKernel,
  BatonLayerNormGradX: layerNormGradXKernel,
  BatonLayerNormGradParams: layerNormGradParamsKernel,
  BatonGelu: geluKernel,
  BatonGeluGrad: geluGradKernel,
  BatonCausalSoftmax: causalSoftmaxKernel,
  BatonCausalSoftmaxGrad: causalSoftmaxGradKernel,
} as const;

/** The fused kernels' names, as the kernel set lists them. */
export const FUSED_KERNELS = Object.keys(MAKERS) as (keyof typeof MAKERS)[];

const run = (name: string, inputs: tf.NamedTensorMap, attrs: Record<string, number> = {}) =>
  tf.engine().runKernel(name, inputs, attrs as unknown as tf.NamedAttrMap);

/** A dg or db computed with the other and not yet asked for (see sharedParamGrads). */
let unclaimed: tf.Tensor | null = null;

/**
 * The closures for g and b, sharing one BatonLayerNormGradParams call (it computes dg and
 * db together). Every caller (tfjs's backprop, models/kept-tape.ts) calls a node's
 * closures, each in its own tidy, right after its gradFunc; so the first one asked for
 * computes both and keeps the other for the second, which returns a clone of it (data
 * shared, not copied) and disposes the kept one. If the second is never asked for
 * (its input was pruned: a gradient for g but not b), the kept tensor is disposed at the
 * next LayerNorm gradFunc, so at most one is held between backward passes.
 */
function sharedParamGrads(both: () => tf.Tensor[]): { g: () => tf.Tensor; b: () => tf.Tensor } {
  unclaimed?.dispose();
  unclaimed = null;
  let pair: tf.Tensor[] | null = null;
  const pick = (i: number) => () => {
    if (pair) {
      // A clone made here belongs to the caller's scopes as usual (the kept one would escape their tidies).
      const mine = pair[i]!.clone();
      pair[i]!.dispose();
      unclaimed = null;
      return mine;
    }
    pair = both();
    unclaimed = tf.keep(pair[1 - i]!);
    return pair[i]!;
  };
  return { g: pick(0), b: pick(1) };
}

let gradientsRegistered = false;

function registerGradients(): void {
  if (gradientsRegistered) return;
  gradientsRegistered = true;
  tf.registerGradient({
    kernelName: 'BatonLayerNorm',
    inputsToSave: ['x', 'g'],
    gradFunc: (dy, saved, attrs) => {
      const [x, g] = saved as [tf.Tensor, tf.Tensor];
      const d = dy as tf.Tensor;
      const eps = { eps: (attrs as { eps: number }).eps };
      return {
        x: () => run('BatonLayerNormGradX', { dy: d, x, g }, eps) as tf.Tensor,
        ...sharedParamGrads(() => run('BatonLayerNormGradParams', { dy: d, x }, eps) as tf.Tensor[]),
      };
    },
  });
  tf.registerGradient({
    kernelName: 'BatonGelu',
    inputsToSave: ['x'],
    gradFunc: (dy, saved) => ({
      x: () => run('BatonGeluGrad', { dy: dy as tf.Tensor, x: saved[0]! }) as tf.Tensor,
    }),
  });
  tf.registerGradient({
    kernelName: 'BatonCausalSoftmax',
    outputsToSave: [true],
    gradFunc: (dy, saved, attrs) => ({
      s: () =>
        run(
          'BatonCausalSoftmaxGrad',
          { dy: dy as tf.Tensor, y: saved[0]! },
          { scale: (attrs as { scale: number }).scale },
        ) as tf.Tensor,
    }),
  });
}

/** Registers the fused kernels on `backendName`; returns their names. */
export function registerFusedKernels(native: Addon, backendName: string): string[] {
  registerGradients();
  for (const [name, make] of Object.entries(MAKERS)) {
    if (tf.getKernel(name, backendName)) tf.unregisterKernel(name, backendName);
    tf.registerKernel({ kernelName: name, backendName, kernelFunc: make(native, backendName) });
  }
  return [...FUSED_KERNELS];
}

/** Removes the fused kernels from `backendName` (the ops compose tfjs kernels again). */
export function removeFusedKernels(backendName: string): void {
  for (const name of FUSED_KERNELS) if (tf.getKernel(name, backendName)) tf.unregisterKernel(name, backendName);
}

const fusedHere = (name: string) => tf.getKernel(name, tf.getBackend()) !== undefined;

const float = (...xs: tf.Tensor[]) => xs.every((x) => x.dtype === 'float32');

/** LayerNorm over the last axis in one kernel, or null (compose it from tfjs ops). */
export function fusedLayerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: number): tf.Tensor | null {
  const c = x.shape[x.shape.length - 1];
  if (!fusedHere('BatonLayerNorm') || !float(x, g, b) || x.rank < 1 || g.rank !== 1 || b.rank !== 1) return null;
  if (g.shape[0] !== c || b.shape[0] !== c || x.size === 0) return null;
  return run('BatonLayerNorm', { x, g, b }, { eps }) as tf.Tensor;
}

/** GELU (tanh form) in one kernel, or null. */
export function fusedGelu(x: tf.Tensor): tf.Tensor | null {
  if (!fusedHere('BatonGelu') || !float(x) || x.size === 0) return null;
  return run('BatonGelu', { x }) as tf.Tensor;
}

/** softmax(scale·s + causal mask) over the last axis of s (..., T, T) in one kernel, or null. */
export function fusedCausalSoftmax(s: tf.Tensor, scale: number): tf.Tensor | null {
  const r = s.rank;
  if (!fusedHere('BatonCausalSoftmax') || !float(s) || r < 2 || s.shape[r - 1] !== s.shape[r - 2] || s.size === 0)
    return null;
  return run('BatonCausalSoftmax', { s }, { scale }) as tf.Tensor;
}
