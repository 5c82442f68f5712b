// The native kernel functions of models/native-kernels.ts: BatchMatMul and _FusedMatMul as
// one CBLAS sgemm per batch entry and Sum over leading axes as a C column sum
// (native/baton_native.c), on the memory tfjs already holds: on wasm, views of the wasm
// heap; on cpu, the backend's typed arrays. Each falls back per call to the kernel
// registered before it when the dtypes, shapes or attributes are not ones it handles
// (listed in models/native-kernels.ts).

import * as tf from '@tensorflow/tfjs';
import { KernelArgs, leadingAxesSum, size } from './kernel-args';

/** The addon's functions (native/baton_native.c). */
export interface Addon {
  sgemm(
    a: Float32Array,
    b: Float32Array,
    c: Float32Array,
    batch: number,
    aBatched: boolean,
    bBatched: boolean,
    m: number,
    n: number,
    k: number,
    transA: boolean,
    transB: boolean,
    bias: Float32Array | null,
    relu: boolean,
  ): void;
  colSum(x: Float32Array, out: Float32Array, rows: number, cols: number): void;
  layerNorm(
    x: Float32Array,
    g: Float32Array,
    b: Float32Array,
    y: Float32Array,
    rows: number,
    cols: number,
    eps: number,
  ): void;
  layerNormGradX(
    dy: Float32Array,
    x: Float32Array,
    g: Float32Array,
    dx: Float32Array,
    rows: number,
    cols: number,
    eps: number,
  ): void;
  layerNormGradParams(
    dy: Float32Array,
    x: Float32Array,
    dg: Float32Array,
    db: Float32Array,
    rows: number,
    cols: number,
    eps: number,
  ): void;
  gelu(x: Float32Array, y: Float32Array, n: number): void;
  geluGrad(dy: Float32Array, x: Float32Array, dx: Float32Array, n: number): void;
  causalSoftmax(s: Float32Array, y: Float32Array, batch: number, t: number, scale: number): void;
  causalSoftmaxGrad(dy: Float32Array, y: Float32Array, ds: Float32Array, batch: number, t: number, scale: number): void;
  segmentSum(x: Float32Array, ids: Int32Array, out: Float32Array, rows: number, width: number, segments: number): void;
  gatherRows(x: Float32Array, ids: Int32Array, out: Float32Array, n: number, width: number, rows: number): boolean;
  setThreads(n: number): void;
  threads(): number;
  config(): string;
}

/** Float32 data of a tensor and a way to make the output, on the two backends whose memory JS can see. */
export interface Memory {
  view(x: tf.TensorInfo): Float32Array | null;
  /** The int32 data of an int32 tensor, or null. */
  viewInt32(x: tf.TensorInfo): Int32Array | null;
  /** Allocates the output; views taken before it may be stale on wasm (the heap can grow), so take them after. */
  output(shape: number[]): { info: tf.TensorInfo; data: () => Float32Array };
}

export function memoryOf(backendName: string, backend: unknown): Memory {
  if (backendName === 'wasm') {
    const b = backend as {
      typedArrayFromHeap(x: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
      makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
    };
    const raw = (x: tf.TensorInfo) => b.typedArrayFromHeap(x);
    return {
      view: (x) => {
        const v = raw(x);
        return v instanceof Float32Array ? v : null;
      },
      viewInt32: (x) => {
        const v = raw(x);
        return v instanceof Int32Array ? v : null;
      },
      output: (shape) => {
        const info = b.makeOutput(shape, 'float32');
        return { info, data: () => b.typedArrayFromHeap(info) as Float32Array };
      },
    };
  }
  const b = backend as {
    data: { get(id: tf.DataId): { values?: unknown } | undefined };
    makeTensorInfo(shape: number[], dtype: tf.DataType, values: Float32Array): tf.TensorInfo;
  };
  return {
    view: (x) => {
      const v = b.data.get(x.dataId)?.values;
      return v instanceof Float32Array ? v : null;
    },
    viewInt32: (x) => {
      const v = b.data.get(x.dataId)?.values;
      return v instanceof Int32Array ? v : null;
    },
    output: (shape) => {
      const values = new Float32Array(size(shape));
      const info = b.makeTensorInfo(shape, 'float32', values);
      return { info, data: () => values };
    },
  };
}

/** A plan for op(a)·op(b) as sgemm calls, or null when the shapes need tfjs's general broadcasting. */
export function sgemmPlan(a: readonly number[], b: readonly number[], tA: boolean, tB: boolean) {
  if (a.length < 2 || b.length < 2) return null;
  const m = tA ? a[a.length - 1]! : a[a.length - 2]!;
  const k = tA ? a[a.length - 2]! : a[a.length - 1]!;
  const kb = tB ? b[b.length - 1]! : b[b.length - 2]!;
  const n = tB ? b[b.length - 2]! : b[b.length - 1]!;
  if (k !== kb) return null;
  const batchA = a.slice(0, -2);
  const batchB = b.slice(0, -2);
  const rank = Math.max(batchA.length, batchB.length);
  const pad = (s: readonly number[]) => [...new Array<number>(rank - s.length).fill(1), ...s];
  const pa = pad(batchA);
  const pb = pad(batchB);
  const aOne = size(batchA) === 1;
  const bOne = size(batchB) === 1;
  const same = pa.every((d, i) => d === pb[i]);
  if (!same && !aOne && !bOne) return null;
  const outBatch = same ? pa : aOne ? pb : pa;
  return {
    m,
    n,
    k,
    batch: size(outBatch),
    aBatched: !aOne || same,
    bBatched: !bOne || same,
    outShape: [...outBatch, m, n],
  };
}

export function nativeMatMul(
  native: Addon,
  backendName: string,
  fallback: tf.KernelConfig,
  fused: boolean,
): tf.KernelFunc {
  return (args: KernelArgs) => {
    const a = args.inputs['a'] as tf.TensorInfo;
    const b = args.inputs['b'] as tf.TensorInfo;
    const attrs = args.attrs as { transposeA?: boolean; transposeB?: boolean; activation?: string };
    const tA = !!attrs.transposeA;
    const tB = !!attrs.transposeB;
    const plan = sgemmPlan(a.shape, b.shape, tA, tB);
    const bias = fused ? (args.inputs['bias'] as tf.TensorInfo | undefined) : undefined;
    const activation = fused ? (attrs.activation ?? 'linear') : 'linear';
    const supported =
      plan !== null &&
      a.dtype === 'float32' &&
      b.dtype === 'float32' &&
      size(a.shape) > 0 &&
      size(b.shape) > 0 &&
      (activation === 'linear' || activation === 'relu') &&
      !(fused && args.inputs['preluActivationWeights']) &&
      (!bias ||
        (bias.dtype === 'float32' && size(bias.shape) === plan.n && bias.shape[bias.shape.length - 1] === plan.n));
    if (!supported) return fallback.kernelFunc(args);
    const mem = memoryOf(backendName, args.backend);
    const out = mem.output(plan.outShape);
    const va = mem.view(a);
    const vb = mem.view(b);
    const vbias = bias ? mem.view(bias) : null;
    if (!va || !vb || (bias && !vbias)) {
      (args.backend as unknown as { disposeData(id: tf.DataId): void }).disposeData(out.info.dataId);
      return fallback.kernelFunc(args);
    }
    native.sgemm(
      va,
      vb,
      out.data(),
      plan.batch,
      plan.aBatched,
      plan.bBatched,
      plan.m,
      plan.n,
      plan.k,
      tA,
      tB,
      vbias,
      activation === 'relu',
    );
    return out.info;
  };
}

/** Sum over the leading axes of a float32 tensor natively; other reductions go to `fallback`. */
export function nativeSum(native: Addon, backendName: string, fallback: tf.KernelConfig): tf.KernelFunc {
  return (args: KernelArgs) => {
    const sum = leadingAxesSum(args);
    if (sum === null || size(sum.x.shape) === 0) return fallback.kernelFunc(args);
    const { x, axes, keepDims } = sum;
    const rest = x.shape.slice(axes);
    const mem = memoryOf(backendName, args.backend);
    const out = mem.output(keepDims ? [...new Array<number>(axes).fill(1), ...rest] : rest);
    const vx = mem.view(x);
    if (!vx) {
      (args.backend as unknown as { disposeData(id: tf.DataId): void }).disposeData(out.info.dataId);
      return fallback.kernelFunc(args);
    }
    native.colSum(vx, out.data(), size(x.shape.slice(0, axes)), size(rest));
    return out.info;
  };
}
