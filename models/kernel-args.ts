// What the kernels Baton registers (tfjs-fixes.ts, native-kernel-funcs.ts) read off tfjs's arguments.

import * as tf from '@tensorflow/tfjs';

export type KernelArgs = Parameters<tf.KernelFunc>[0];

export const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/**
 * A Sum's input and how many leading axes it reduces, when it reduces axes 0…k−1 of a
 * float32 tensor and keeps at least one (the bias and LayerNorm-gain gradients); null for
 * any other Sum, which goes to the kernel it replaces.
 */
export function leadingAxesSum(args: KernelArgs): { x: tf.TensorInfo; axes: number; keepDims: boolean } | null {
  const x = args.inputs['x'] as tf.TensorInfo;
  const { axis, keepDims } = args.attrs as { axis: number | number[]; keepDims: boolean };
  const rank = x.shape.length;
  const axes = (Array.isArray(axis) ? axis : [axis]).map((a) => (a < 0 ? a + rank : a)).sort((a, b) => a - b);
  const leading = axes.length > 0 && axes.length < rank && axes.every((a, i) => a === i);
  return leading && x.dtype === 'float32' ? { x, axes: axes.length, keepDims } : null;
}
