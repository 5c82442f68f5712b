import * as assert from 'assert';
import * as fs from 'fs';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import {
  ADDON_PATH,
  NativeKernelError,
  describeKernels,
  installNativeKernels,
  kernelSetName,
  nativeKernelReport,
  parseKernelsChoice,
  removeNativeKernels,
  setNativeThreads,
  sgemmPlan,
} from '../models/native-kernels';
import { SeededRandom } from '../models/seeded-init';
import { ThreadsError, cores, defaultThreads, parseThreads, threadsFromEnv } from '../models/threads';
import { valuesOfShape } from './helpers-values';

const built = fs.existsSync(ADDON_PATH);

/** The full native kernel set: the sgemm set, the embedding gradient and the fused kernels. */
const ALL_NATIVE = [
  'BatchMatMul',
  '_FusedMatMul',
  'Sum',
  'UnsortedSegmentSum',
  'GatherV2',
  'BatonLayerNorm',
  'BatonLayerNormGradX',
  'BatonLayerNormGradParams',
  'BatonGelu',
  'BatonGeluGrad',
  'BatonCausalSoftmax',
  'BatonCausalSoftmaxGrad',
  'BatonAdamW',
];

/**
 * Runs `f` on the cpu backend with tfjs's own kernels (the reference), then on `backend`
 * with the native ones. Not wasm's own kernels as the reference: its matMul caches an
 * operator per operand tensor id, and the leading-axes Sum fix reshapes one tensor to two
 * shapes (sum over axis 0, then over axes 0 and 1, of the same tensor aborts the wasm module).
 */
async function tfjsThenNative<T>(backend: 'cpu' | 'wasm', f: () => T): Promise<{ ref: T; native: T }> {
  await loadBackend({ force: 'cpu' });
  installNativeKernels('cpu', { choice: 'tfjs' });
  const ref = f();
  await loadBackend({ force: backend });
  installNativeKernels(backend, { choice: 'native', threads: 1 });
  return { ref, native: f() };
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string, rtol = 1e-5): void {
  assert.strictEqual(actual.length, expected.length, `${what}: length`);
  let peak = 1e-6;
  for (let i = 0; i < expected.length; i++) peak = Math.max(peak, Math.abs(expected[i]!));
  for (let i = 0; i < expected.length; i++)
    assert.ok(
      Math.abs(actual[i]! - expected[i]!) <= rtol * peak,
      `${what}[${i}]: native ${actual[i]}, tfjs ${expected[i]}`,
    );
}

/** Shapes and transpose flags of the matMul comparisons. */
const MATMUL_CASES: Array<[number[], number[], boolean, boolean]> = [
  [[5, 7], [7, 3], false, false],
  [[7, 5], [7, 3], true, false],
  [[5, 7], [3, 7], false, true],
  [[7, 5], [3, 7], true, true],
  [[2, 3, 4, 5], [2, 3, 5, 6], false, false],
  [[2, 3, 5, 4], [2, 3, 6, 5], true, true],
  [[6, 4, 5], [5, 3], false, false],
  [[4, 5], [6, 5, 3], false, false],
  [[2, 1, 4, 5], [1, 3, 5, 6], false, false],
  [[64, 16], [16, 64], false, false],
];

describe('native kernels: plans and names', () => {
  it('plans op(a)·op(b) as sgemm calls, one side broadcast at most, and leaves general broadcasting to tfjs', () => {
    assert.deepStrictEqual(sgemmPlan([5, 7], [7, 3], false, false), {
      m: 5,
      n: 3,
      k: 7,
      batch: 1,
      aBatched: true,
      bBatched: true,
      outShape: [5, 3],
    });
    assert.deepStrictEqual(sgemmPlan([2, 4, 7, 5], [2, 4, 3, 7], true, true), {
      m: 5,
      n: 3,
      k: 7,
      batch: 8,
      aBatched: true,
      bBatched: true,
      outShape: [2, 4, 5, 3],
    });
    assert.deepStrictEqual(sgemmPlan([6, 4, 5], [5, 3], false, false), {
      m: 4,
      n: 3,
      k: 5,
      batch: 6,
      aBatched: true,
      bBatched: false,
      outShape: [6, 4, 3],
    });
    assert.deepStrictEqual(sgemmPlan([4, 5], [6, 5, 3], false, false), {
      m: 4,
      n: 3,
      k: 5,
      batch: 6,
      aBatched: false,
      bBatched: true,
      outShape: [6, 4, 3],
    });
    assert.strictEqual(sgemmPlan([2, 1, 4, 5], [1, 3, 5, 6], false, false), null, 'both sides broadcast');
    assert.strictEqual(sgemmPlan([4, 5], [6, 3], false, false), null, 'inner sizes differ');
  });

  it('names the kernel set with the thread count, since OpenBLAS rounds by its threads', () => {
    const on = {
      backend: 'wasm',
      kernels: ['BatchMatMul', '_FusedMatMul', 'Sum'],
      library: 'OpenBLAS 0.3.21 Zen',
      threads: 2,
      reason: null,
    };
    assert.strictEqual(kernelSetName(on), 'native-sgemm:BatchMatMul,_FusedMatMul,Sum;threads=2');
    assert.strictEqual(kernelSetName(on, 1), 'native-sgemm:BatchMatMul,_FusedMatMul,Sum;threads=1');
    assert.strictEqual(
      describeKernels(on),
      'native sgemm (OpenBLAS 0.3.21, 2 threads): BatchMatMul, _FusedMatMul, Sum',
    );
    const off = { backend: 'wasm', kernels: [], library: null, threads: null, reason: 'the native addon is not built' };
    assert.strictEqual(kernelSetName(off, 4), 'tfjs');
    assert.strictEqual(describeKernels(off), 'tfjs (native: the native addon is not built)');
  });

  it('refuses unknown kernel sets and thread counts, naming the source', () => {
    assert.throws(
      () => parseKernelsChoice('fast', 'BATON_KERNELS'),
      (e: Error) =>
        e instanceof NativeKernelError &&
        /BATON_KERNELS: unknown kernel set "fast"; choices are auto, native, sgemm, tfjs/.test(e.message),
    );
    assert.throws(
      () => parseThreads('0', '--threads'),
      (e: Error) =>
        e instanceof ThreadsError && /--threads: threads must be an integer in \[1, 1024\], got "0"/.test(e.message),
    );
    assert.throws(() => threadsFromEnv({ BATON_THREADS: 'two' }), /BATON_THREADS: threads must be/);
    assert.strictEqual(threadsFromEnv({ BATON_THREADS: '3' }), 3);
    assert.strictEqual(threadsFromEnv({}), null);
    assert.ok(defaultThreads(1) >= defaultThreads(2) && defaultThreads(64) === 1);
  });
});

describe('native kernels on the backends', function () {
  before(function () {
    if (!built) this.skip(); // the build is optional; the report's reason is tested below
  });
  after(() => {
    // As the loader left them for the other test files.
    for (const b of ['cpu', 'wasm']) {
      removeNativeKernels(b);
      installNativeKernels(b);
    }
  });

  for (const backend of ['wasm', 'cpu'] as const) {
    it(`${backend}: matMul with every transpose flag, batch and broadcast shape equals tfjs's kernels (integers exactly)`, async () => {
      for (const integers of [true, false]) {
        for (const [sa, sb, tA, tB] of MATMUL_CASES) {
          const rng = new SeededRandom(sa.length * 100 + sb.length + (integers ? 7 : 0));
          const a = valuesOfShape(rng, sa, integers);
          const b = valuesOfShape(rng, sb, integers);
          const run = () => tf.tidy(() => tf.matMul(tf.tensor(a, sa), tf.tensor(b, sb), tA, tB).dataSync().slice());
          const { ref, native } = await tfjsThenNative(backend, run);
          const what = `${backend} [${sa}]${tA ? 'ᵀ' : ''}·[${sb}]${tB ? 'ᵀ' : ''}`;
          if (integers) assert.deepStrictEqual(Array.from(native), Array.from(ref), what);
          else assertClose(native, ref, what);
        }
      }
    });

    it(`${backend}: fused matMul with a bias and relu, and sums over leading axes, equal tfjs's kernels`, async () => {
      const rng = new SeededRandom(3);
      const a = valuesOfShape(rng, [6, 5], false);
      const b = valuesOfShape(rng, [5, 4], false);
      const bias = valuesOfShape(rng, [4], false);
      const x = valuesOfShape(rng, [2, 3, 4], false);
      const run = () =>
        tf.tidy(() => {
          const fused = tf.fused.matMul({
            a: tf.tensor(a, [6, 5]),
            b: tf.tensor(b, [4, 5]),
            transposeB: true,
            bias: tf.tensor(bias, [4]),
            activation: 'relu',
          });
          const t = tf.tensor(x, [2, 3, 4]);
          return [fused, t.sum([0, 1]), t.sum(0, true), t.sum(-1)].map((y) => Array.from(y.dataSync()));
        });
      const { ref, native } = await tfjsThenNative(backend, run);
      const names = [
        'fused matMul + bias + relu',
        'sum over axes 0,1',
        'sum over axis 0, keepDims',
        'sum over the last axis (tfjs)',
      ];
      names.forEach((n, i) => assertClose(native[i]!, ref[i]!, `${backend} ${n}`));
      assert.ok(native[0]!.some((v) => v === 0) && native[0]!.every((v) => v >= 0), 'relu applied');
    });
  }

  it('sgemm refuses a shape whose sizes pass 2^64 instead of reading past the arrays', () => {
    const addon = require(ADDON_PATH) as { sgemm: (...a: unknown[]) => void };
    const f = () => new Float32Array(4);
    // 16 batches of 2^30·2^30 floats: 2^64, which wraps to 0 in 64 bits and would pass any length.
    const n = 2 ** 30;
    assert.throws(
      () => addon.sgemm(f(), f(), f(), 16, true, true, n, n, n, false, false, null, false),
      /overflow 64 bits/,
    );
    assert.throws(
      () => addon.sgemm(f(), f(), f(), 1, false, false, 3, 3, 3, false, false, null, false),
      /a is shorter/,
    );
  });

  it('reports which kernels run natively, with the BLAS library and its threads, and restores tfjs kernels when asked', async () => {
    const report = await loadBackend({ force: 'wasm' });
    const r = installNativeKernels('wasm', { choice: 'native' });
    assert.deepStrictEqual(r.kernels, ALL_NATIVE);
    assert.deepStrictEqual(installNativeKernels('wasm', { choice: 'sgemm' }).kernels, [
      'BatchMatMul',
      '_FusedMatMul',
      'Sum',
    ]);
    assert.match(r.library ?? '', /OpenBLAS/);
    setNativeThreads(1);
    assert.strictEqual(nativeKernelReport().threads, 1);
    // The backend loaded again (stages in this process) keeps the threads --threads set.
    await loadBackend({ force: 'wasm' });
    assert.strictEqual(installNativeKernels('wasm', { choice: 'native' }).threads, 1);
    setNativeThreads(cores());
    assert.strictEqual(report.kernels.backend, 'wasm');
    const off = installNativeKernels('wasm', { choice: 'tfjs' });
    assert.deepStrictEqual(off.kernels, []);
    assert.match(off.reason ?? '', /BATON_KERNELS=tfjs/);
    installNativeKernels('wasm');
  });

  it('wasm: a clone and a same-dtype cast share data that outlives the original, and keep its values', async () => {
    await loadBackend({ force: 'wasm' });
    const x = tf.tensor([1.5, -2, 3], [3]);
    const before = tf.memory().numBytes;
    const c = x.clone();
    const f = tf.cast(x, 'float32');
    assert.strictEqual(tf.memory().numBytes, before + 2 * 12, 'the engine counts each tensor');
    x.dispose();
    assert.deepStrictEqual(Array.from(c.dataSync()), [1.5, -2, 3]);
    c.dispose();
    assert.deepStrictEqual(Array.from(f.dataSync()), [1.5, -2, 3]);
    f.dispose();
    assert.deepStrictEqual(
      Array.from(tf.tidy(() => tf.cast(tf.tensor([1.7, -2.2]), 'int32').dataSync())),
      [1, -2],
      'a real cast still converts',
    );
  });
});

describe('native kernels without the addon', () => {
  it('the wasm backend loads either way and the loader says which kernels are native, or why none are', async () => {
    const report = await loadBackend({ force: 'wasm' });
    if (process.env['BATON_KERNELS'] === 'tfjs') assert.match(report.kernels.reason ?? '', /BATON_KERNELS=tfjs/);
    else if (built) assert.deepStrictEqual(report.kernels.kernels, ALL_NATIVE);
    else assert.match(report.kernels.reason ?? '', /native addon is not built/);
  });

  it('other backends keep their own kernels, and asking for native kernels there is refused', () => {
    assert.match(
      installNativeKernels('tensorflow', { choice: 'auto' }).reason ?? '',
      /the tensorflow backend keeps its own kernels/,
    );
    assert.throws(
      () => installNativeKernels('tensorflow', { choice: 'native' }),
      (e: Error) => e instanceof NativeKernelError && /BATON_KERNELS=native/.test(e.message),
    );
  });
});
