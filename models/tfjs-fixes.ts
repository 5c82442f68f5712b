// Kernel fixes for the tfjs wasm backend (4.22), installed by the backend loader:
//  (a) BatchMatMul and _FusedMatMul with transposeA/transposeB run 10-20x slower than an
//      explicit Transpose followed by a flag-free matMul, and every matMul gradient uses
//      the flags. The wrappers call the original kernel without flags after explicit
//      transposes, choosing between transposing the operands and computing the
//      transposed product, whichever moves fewer elements (see transposePlan).
//  (b) wasm has no UnsortedSegmentSum kernel, which is gather's gradient, so embeddings
//      cannot train. This one reads the operands and sums rows in JS (the data is the
//      embedding gradient: one row per token, cheap next to the matMuls).
//  (c) Sum over leading axes (every bias gradient) transposes first; it runs as a
//      matMul with a row of ones instead.
// The heap guard the loader installs beside them is in wasm-heap-guard.ts.
//
// Not fixed: gather with batchDims=1 reads out of bounds on wasm; Baton's models do not
// use it.

import * as tf from '@tensorflow/tfjs';
import { KernelArgs, leadingAxesSum, size } from './kernel-args';

export {
  DEFAULT_WASM_HEAP_LIMIT,
  WasmHeapError,
  checkWasmHeap,
  installWasmAllocationGuard,
  setWasmAllocationLimit,
} from './wasm-heap-guard';

/** The parts of the wasm backend these kernels use. */
interface WasmBackendLike {
  readSync(dataId: tf.DataId): unknown;
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(info: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
  disposeData(dataId: tf.DataId, force?: boolean): boolean;
}

const originals = new Map<string, tf.KernelConfig>();

function kernelOrThrow(name: string): tf.KernelConfig {
  const k = tf.getKernel(name, 'wasm');
  if (!k)
    throw new Error(
      `tfjs-fixes: the wasm backend has no ${name} kernel to build on (is @tensorflow/tfjs-backend-wasm loaded?)`,
    );
  return k;
}

/** Swaps the last two axes with the backend's own Transpose kernel. */
function swapLastTwo(x: tf.TensorInfo, args: KernelArgs): tf.TensorInfo {
  const rank = x.shape.length;
  const perm = x.shape.map((_, i) => i);
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  const transpose = kernelOrThrow('Transpose');
  return transpose.kernelFunc({ inputs: { x }, backend: args.backend, attrs: { perm } }) as tf.TensorInfo;
}

/** Output shape of op(a)·op(b), batch dims broadcast. */
function matMulOutShape(a: readonly number[], b: readonly number[], tA: boolean, tB: boolean): number[] {
  const m = tA ? a[a.length - 1]! : a[a.length - 2]!;
  const n = tB ? b[b.length - 2]! : b[b.length - 1]!;
  const batchA = a.slice(0, -2);
  const batchB = b.slice(0, -2);
  const rank = Math.max(batchA.length, batchB.length);
  const batch: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = batchA[batchA.length - rank + i] ?? 1;
    const db = batchB[batchB.length - rank + i] ?? 1;
    batch.push(Math.max(da, db));
  }
  return [...batch, m, n];
}

/**
 * How to run a flagged matMul with flag-free kernels, moving as few elements as possible:
 * 'operands' transposes the flagged operands; 'swap' uses (op(a)·op(b))ᵀ = op(b)ᵀ·op(a)ᵀ,
 * i.e. computes the transposed product with swapped operands and transposes the result.
 * Only plain BatchMatMul may swap (a fused bias or activation applies to the unswapped output).
 */
export function transposePlan(
  a: readonly number[],
  b: readonly number[],
  tA: boolean,
  tB: boolean,
): 'none' | 'operands' | 'swap' {
  if (!tA && !tB) return 'none';
  const out = size(matMulOutShape(a, b, tA, tB));
  const viaOperands = (tA ? size(a) : 0) + (tB ? size(b) : 0);
  // Swapped: need bᵀ-side operand flag-free (transpose b unless tB), a likewise (unless tA).
  const viaSwap = (tB ? 0 : size(b)) + (tA ? 0 : size(a)) + out;
  return viaSwap < viaOperands ? 'swap' : 'operands';
}

function explicitTransposeWrapper(original: tf.KernelConfig, maySwap: boolean): tf.KernelFunc {
  return (args: KernelArgs) => {
    const attrs = args.attrs as { transposeA?: boolean; transposeB?: boolean };
    const tA = !!attrs.transposeA;
    const tB = !!attrs.transposeB;
    if (!tA && !tB) return original.kernelFunc(args);
    const backend = args.backend as unknown as WasmBackendLike;
    const a = args.inputs['a'] as tf.TensorInfo;
    const b = args.inputs['b'] as tf.TensorInfo;
    const plan = maySwap ? transposePlan(a.shape, b.shape, tA, tB) : 'operands';
    const temporaries: tf.TensorInfo[] = [];
    const flip = (x: tf.TensorInfo) => {
      const t = swapLastTwo(x, args);
      temporaries.push(t);
      return t;
    };
    const flagFree = { ...args.attrs, transposeA: false, transposeB: false };
    try {
      if (plan === 'operands') {
        const inputs = { ...args.inputs, a: tA ? flip(a) : a, b: tB ? flip(b) : b };
        return original.kernelFunc({ ...args, inputs, attrs: flagFree });
      }
      // op(a)·op(b) = (op(b)ᵀ · op(a)ᵀ)ᵀ, where op(b)ᵀ is b itself when tB, else bᵀ.
      const left = tB ? b : flip(b);
      const right = tA ? a : flip(a);
      const product = original.kernelFunc({ ...args, inputs: { a: left, b: right }, attrs: flagFree }) as tf.TensorInfo;
      temporaries.push(product);
      return swapLastTwo(product, args);
    } finally {
      for (const t of temporaries) backend.disposeData(t.dataId);
    }
  };
}

/**
 * Sum over the leading axes (bias and LayerNorm-gain gradients) as ones(1, N)·x(N, M):
 * wasm's Sum transposes the input first when the reduced axes are not the last ones,
 * which is 20-30x slower than the matMul.
 */
function leadingAxesSumWrapper(original: tf.KernelConfig, matMul: tf.KernelConfig): tf.KernelFunc {
  return (args: KernelArgs) => {
    const sum = leadingAxesSum(args);
    if (sum === null) return original.kernelFunc(args);
    const { x, axes, keepDims } = sum;
    const backend = args.backend as unknown as WasmBackendLike;
    const n = size(x.shape.slice(0, axes));
    const rest = x.shape.slice(axes);
    const reshape = kernelOrThrow('Reshape');
    const ones = backend.makeOutput([1, n], 'float32');
    (backend.typedArrayFromHeap(ones) as Float32Array).fill(1);
    const x2 = reshape.kernelFunc({
      inputs: { x },
      backend: args.backend,
      attrs: { shape: [n, size(rest)] },
    }) as tf.TensorInfo;
    try {
      const row = matMul.kernelFunc({
        inputs: { a: ones, b: x2 },
        backend: args.backend,
        attrs: { transposeA: false, transposeB: false },
      }) as tf.TensorInfo;
      const outShape = keepDims ? [...new Array<number>(axes).fill(1), ...rest] : rest;
      const out = reshape.kernelFunc({
        inputs: { x: row },
        backend: args.backend,
        attrs: { shape: outShape },
      }) as tf.TensorInfo;
      backend.disposeData(row.dataId);
      return out;
    } finally {
      backend.disposeData(ones.dataId);
      backend.disposeData(x2.dataId);
    }
  };
}

/** Sums rows of x into numSegments buckets; ids outside [0, numSegments) are dropped (as on cpu). */
function unsortedSegmentSum(args: KernelArgs): tf.TensorInfo {
  const backend = args.backend as unknown as WasmBackendLike;
  const x = args.inputs['x'] as tf.TensorInfo;
  const segmentIds = args.inputs['segmentIds'] as tf.TensorInfo;
  const numSegments = (args.attrs as { numSegments: number }).numSegments;
  if (x.dtype !== 'float32' && x.dtype !== 'int32')
    throw new Error(`UnsortedSegmentSum (wasm fix): dtype ${x.dtype} is not supported`);
  const idRank = segmentIds.shape.length;
  for (let i = 0; i < idRank; i++) {
    if (segmentIds.shape[i] !== x.shape[i]) {
      throw new Error(
        `UnsortedSegmentSum (wasm fix): segmentIds shape [${segmentIds.shape}] is not a prefix of x shape [${x.shape}]`,
      );
    }
  }
  const rowShape = x.shape.slice(idRank);
  const rowSize = rowShape.reduce((a, b) => a * b, 1);
  const ids = backend.readSync(segmentIds.dataId) as Int32Array;
  const values = backend.readSync(x.dataId) as Float32Array | Int32Array;
  const out = backend.makeOutput([numSegments, ...rowShape], x.dtype);
  const acc = backend.typedArrayFromHeap(out) as Float32Array | Int32Array;
  acc.fill(0);
  for (let r = 0; r < ids.length; r++) {
    const s = ids[r]!;
    if (s < 0 || s >= numSegments) continue;
    const src = r * rowSize;
    const dst = s * rowSize;
    for (let j = 0; j < rowSize; j++) acc[dst + j] += values[src + j]!;
  }
  return out;
}

function replace(config: tf.KernelConfig): void {
  if (tf.getKernel(config.kernelName, 'wasm')) tf.unregisterKernel(config.kernelName, 'wasm');
  tf.registerKernel(config);
}

/** Installs the wasm kernel fixes. Idempotent; a no-op for other backends' kernels. */
export function installWasmFixes(): void {
  if (originals.size > 0) return;
  for (const name of ['BatchMatMul', '_FusedMatMul']) {
    const original = kernelOrThrow(name);
    originals.set(name, original);
    replace({ ...original, kernelFunc: explicitTransposeWrapper(original, name === 'BatchMatMul') });
  }
  const sum = kernelOrThrow('Sum');
  originals.set('Sum', sum);
  replace({ ...sum, kernelFunc: leadingAxesSumWrapper(sum, originals.get('BatchMatMul')!) });
  if (!tf.getKernel('UnsortedSegmentSum', 'wasm')) {
    replace({
      kernelName: 'UnsortedSegmentSum',
      backendName: 'wasm',
      kernelFunc: unsortedSegmentSum as unknown as tf.KernelFunc,
    });
    originals.set('UnsortedSegmentSum', {
      kernelName: 'UnsortedSegmentSum',
      backendName: 'wasm',
      kernelFunc: unsortedSegmentSum as unknown as tf.KernelFunc,
    });
  }
}

/** Restores the original wasm kernels (for before/after measurements). */
export function removeWasmFixes(): void {
  for (const [name, original] of originals) {
    if (name === 'UnsortedSegmentSum') tf.unregisterKernel(name, 'wasm');
    else replace(original);
  }
  originals.clear();
}
