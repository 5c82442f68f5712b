// The kernel functions of Baton's fused kernels (models/fused-ops.ts registers them):
// LayerNorm and its two gradients, GELU and its gradient, the causal softmax and its
// gradient, each one call into native/fused.c on the memory tfjs holds (wasm heap views,
// or the cpu backend's arrays), and UnsortedSegmentSum (the embedding gradient) as a C
// segment sum and GatherV2 along axis 0 (the embedding lookup) as a C row copy, falling
// back to the kernels they replaced for what they do not handle.
// Outputs are allocated before any view is taken (the wasm heap can grow on allocation);
// a call refused after that (an input not float32, arrays the addon finds too short)
// disposes its outputs before the error leaves, or the backend would keep their memory.

import * as tf from '@tensorflow/tfjs';
import { KernelArgs, size } from './kernel-args';
import { Addon, Memory, memoryOf } from './native-kernel-funcs';

export class FusedKernelError extends Error {
  override name = 'FusedKernelError';
}

/** Float32 views of `xs` (after the outputs were allocated); throws, naming the kernel, when one is not float32 data. */
function views(kernel: string, mem: Memory, xs: readonly tf.TensorInfo[]): Float32Array[] {
  return xs.map((x) => {
    const v = x.dtype === 'float32' ? mem.view(x) : null;
    if (!v) throw new FusedKernelError(`${kernel}: inputs must be float32 tensors, got ${x.dtype} [${x.shape}]`);
    return v;
  });
}

function rowsCols(x: tf.TensorInfo): { rows: number; cols: number } {
  const cols = x.shape[x.shape.length - 1] ?? 1;
  return { rows: cols === 0 ? 0 : size(x.shape) / cols, cols };
}

const disposeData = (backend: unknown, info: tf.TensorInfo) =>
  (backend as { disposeData(id: tf.DataId): void }).disposeData(info.dataId);

/** `fill()`'s result; if it throws, the outputs `outs` are disposed first. */
function filling<T>(backend: unknown, outs: readonly { info: tf.TensorInfo }[], fill: () => T): T {
  try {
    return fill();
  } catch (err) {
    for (const o of outs) disposeData(backend, o.info);
    throw err;
  }
}

type Make = (native: Addon, backendName: string) => tf.KernelFunc;

const inputs = (args: KernelArgs, names: readonly string[]) => names.map((n) => args.inputs[n] as tf.TensorInfo);

/** y = LayerNorm(x; g, b) over the last axis; attrs.eps. */
export const layerNormKernel: Make = (native, backendName) => (args) => {
  const [x, g, b] = inputs(args, ['x', 'g', 'b']);
  const { eps } = args.attrs as { eps: number };
  const mem = memoryOf(backendName, args.backend);
  const y = mem.output(x!.shape);
  filling(args.backend, [y], () => {
    const [vx, vg, vb] = views('BatonLayerNorm', mem, [x!, g!, b!]);
    const { rows, cols } = rowsCols(x!);
    native.layerNorm(vx!, vg!, vb!, y.data(), rows, cols, eps);
  });
  return y.info;
};

/** dx of LayerNorm from dy, x and g. */
export const layerNormGradXKernel: Make = (native, backendName) => (args) => {
  const [dy, x, g] = inputs(args, ['dy', 'x', 'g']);
  const { eps } = args.attrs as { eps: number };
  const mem = memoryOf(backendName, args.backend);
  const dx = mem.output(x!.shape);
  filling(args.backend, [dx], () => {
    const [vdy, vx, vg] = views('BatonLayerNormGradX', mem, [dy!, x!, g!]);
    const { rows, cols } = rowsCols(x!);
    native.layerNormGradX(vdy!, vx!, vg!, dx.data(), rows, cols, eps);
  });
  return dx.info;
};

/** [dg, db] of LayerNorm from dy and x. */
export const layerNormGradParamsKernel: Make = (native, backendName) => (args) => {
  const [dy, x] = inputs(args, ['dy', 'x']);
  const { eps } = args.attrs as { eps: number };
  const mem = memoryOf(backendName, args.backend);
  const { rows, cols } = rowsCols(x!);
  const dg = mem.output([cols]);
  const db = mem.output([cols]);
  filling(args.backend, [dg, db], () => {
    const [vdy, vx] = views('BatonLayerNormGradParams', mem, [dy!, x!]);
    native.layerNormGradParams(vdy!, vx!, dg.data(), db.data(), rows, cols, eps);
  });
  return [dg.info, db.info];
};

/** y = GELU(x), tanh form as x·σ(2z). */
export const geluKernel: Make = (native, backendName) => (args) => {
  const [x] = inputs(args, ['x']);
  const mem = memoryOf(backendName, args.backend);
  const y = mem.output(x!.shape);
  filling(args.backend, [y], () => {
    const [vx] = views('BatonGelu', mem, [x!]);
    native.gelu(vx!, y.data(), size(x!.shape));
  });
  return y.info;
};

export const geluGradKernel: Make = (native, backendName) => (args) => {
  const [dy, x] = inputs(args, ['dy', 'x']);
  const mem = memoryOf(backendName, args.backend);
  const dx = mem.output(x!.shape);
  filling(args.backend, [dx], () => {
    const [vdy, vx] = views('BatonGeluGrad', mem, [dy!, x!]);
    native.geluGrad(vdy!, vx!, dx.data(), size(x!.shape));
  });
  return dx.info;
};

/** Leading size and T of scores (..., T, T). */
function squareTail(kernel: string, s: tf.TensorInfo): { batch: number; t: number } {
  const r = s.shape.length;
  const t = s.shape[r - 1]!;
  if (r < 2 || s.shape[r - 2] !== t)
    throw new FusedKernelError(`${kernel}: scores must be (..., T, T), got [${s.shape}]`);
  return { batch: t === 0 ? 0 : size(s.shape) / (t * t), t };
}

/** Softmax over the last axis of scale·s with the causal mask (key j > query i is left out). */
export const causalSoftmaxKernel: Make = (native, backendName) => (args) => {
  const [s] = inputs(args, ['s']);
  const { scale } = args.attrs as { scale: number };
  const { batch, t } = squareTail('BatonCausalSoftmax', s!);
  const mem = memoryOf(backendName, args.backend);
  const y = mem.output(s!.shape);
  filling(args.backend, [y], () => {
    const [vs] = views('BatonCausalSoftmax', mem, [s!]);
    native.causalSoftmax(vs!, y.data(), batch, t, scale);
  });
  return y.info;
};

export const causalSoftmaxGradKernel: Make = (native, backendName) => (args) => {
  const [dy, y] = inputs(args, ['dy', 'y']);
  const { scale } = args.attrs as { scale: number };
  const { batch, t } = squareTail('BatonCausalSoftmaxGrad', y!);
  const mem = memoryOf(backendName, args.backend);
  const ds = mem.output(y!.shape);
  filling(args.backend, [ds], () => {
    const [vdy, vy] = views('BatonCausalSoftmaxGrad', mem, [dy!, y!]);
    native.causalSoftmaxGrad(vdy!, vy!, ds.data(), batch, t, scale);
  });
  return ds.info;
};

/** UnsortedSegmentSum of float32 rows by int32 ids of x's leading shape; anything else goes to `fallback`. */
export function nativeSegmentSum(native: Addon, backendName: string, fallback: tf.KernelConfig): tf.KernelFunc {
  return (args: KernelArgs) => {
    const [x, ids] = inputs(args, ['x', 'segmentIds']);
    const { numSegments } = args.attrs as { numSegments: number };
    const idRank = ids!.shape.length;
    const handled =
      x!.dtype === 'float32' &&
      ids!.dtype === 'int32' &&
      idRank < x!.shape.length &&
      ids!.shape.every((d, i) => d === x!.shape[i]) &&
      size(x!.shape) > 0;
    if (!handled) return fallback.kernelFunc(args);
    const rowShape = x!.shape.slice(idRank);
    const mem = memoryOf(backendName, args.backend);
    const out = mem.output([numSegments, ...rowShape]);
    const vx = mem.view(x!);
    const vids = mem.viewInt32(ids!);
    if (!vx || !vids) {
      disposeData(args.backend, out.info);
      return fallback.kernelFunc(args);
    }
    native.segmentSum(vx, vids, out.data(), size(ids!.shape), size(rowShape), numSegments);
    return out.info;
  };
}

/** GatherV2 of float32 rows (axis 0, no batch dims) by int32 ids; anything else, or an id out of range, goes to `fallback`. */
export function nativeGather(native: Addon, backendName: string, fallback: tf.KernelConfig): tf.KernelFunc {
  return (args: KernelArgs) => {
    const [x, ids] = inputs(args, ['x', 'indices']);
    const { axis, batchDims } = args.attrs as { axis: number | number[]; batchDims?: number };
    const ax = Array.isArray(axis) ? axis[0] : axis;
    const handled =
      x!.dtype === 'float32' &&
      ids!.dtype === 'int32' &&
      ax === 0 &&
      !batchDims &&
      x!.shape.length >= 1 &&
      size(x!.shape) > 0;
    if (!handled) return fallback.kernelFunc(args);
    const rowShape = x!.shape.slice(1);
    const mem = memoryOf(backendName, args.backend);
    const out = mem.output([...ids!.shape, ...rowShape]);
    const vx = mem.view(x!);
    const vids = mem.viewInt32(ids!);
    const done =
      !!vx && !!vids && native.gatherRows(vx, vids, out.data(), size(ids!.shape), size(rowShape), x!.shape[0]!);
    if (done) return out.info;
    disposeData(args.backend, out.info);
    return fallback.kernelFunc(args);
  };
}
