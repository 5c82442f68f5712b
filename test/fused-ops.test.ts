import * as assert from 'assert';
import * as fs from 'fs';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { ADDON_PATH, installNativeKernels, nativeKernelReport, removeNativeKernels } from '../models/native-kernels';
import { FUSED_KERNELS, fusedCausalSoftmax, fusedGelu, fusedLayerNorm } from '../models/fused-ops';
import { LAYER_NORM_EPS, causalSoftmax, gelu, layerNorm } from '../models/layers';
import { SeededRandom } from '../models/seeded-init';
import { valuesOfShape } from './helpers-values';

const built = fs.existsSync(ADDON_PATH);

type Case = { name: string; shapes: number[][]; f: (...xs: tf.Tensor[]) => tf.Tensor };

/** Each fused op on inputs of these shapes (the first is the activation; the rest, LayerNorm's g and b). */
const CASES: Case[] = [
  { name: 'layerNorm', shapes: [[3, 5, 8], [8], [8]], f: (x, g, b) => layerNorm(x!, g!, b!) },
  { name: 'layerNorm of one row', shapes: [[1, 16], [16], [16]], f: (x, g, b) => layerNorm(x!, g!, b!) },
  { name: 'gelu', shapes: [[4, 6, 10]], f: (x) => gelu(x!) },
  { name: 'causalSoftmax', shapes: [[2, 3, 7, 7]], f: (x) => causalSoftmax(x!, 0.35) },
];

/** The op's value and its gradients for every input under the weights `w` of the output (sum(w·f)). */
function valueAndGrads(c: Case, data: Float32Array[], w: Float32Array): Float32Array[] {
  return tf.tidy(() => {
    const xs = c.shapes.map((s, i) => tf.tensor(data[i]!, s));
    const weights = (y: tf.Tensor) => tf.tensor(w, y.shape);
    const { value, grads } = tf.valueAndGrads((...ys: tf.Tensor[]) => {
      const y = c.f(...ys);
      return y.mul(weights(y)).sum();
    })(xs);
    return [c.f(...xs), value, ...grads].map((t) => t.dataSync() as Float32Array).map((a) => a.slice());
  });
}

function inputsOf(c: Case, seed: number): { data: Float32Array[]; w: Float32Array } {
  const rng = new SeededRandom(seed);
  const data = c.shapes.map((s) => Float32Array.from(valuesOfShape(rng, s, false), (v) => 2 * v));
  const w = Float32Array.from(valuesOfShape(rng, c.shapes[0]!, false));
  return { data, w };
}

function maxRelErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let peak = 1e-6;
  for (let i = 0; i < b.length; i++) peak = Math.max(peak, Math.abs(b[i]!));
  let worst = 0;
  for (let i = 0; i < b.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / peak);
  return worst;
}

describe('fused ops', function () {
  before(function () {
    if (!built) this.skip(); // the build is optional; without it the ops compose tfjs kernels
  });
  after(async () => {
    for (const b of ['cpu', 'wasm']) {
      removeNativeKernels(b);
      installNativeKernels(b);
    }
    await loadBackend({ force: 'wasm' });
  });

  for (const backend of ['wasm', 'cpu'] as const) {
    it(`${backend}: each fused op and its gradients equal the tfjs composition of the same math`, async () => {
      await loadBackend({ force: backend });
      for (const [i, c] of CASES.entries()) {
        const { data, w } = inputsOf(c, 10 + i);
        installNativeKernels(backend, { choice: 'tfjs' });
        const ref = valueAndGrads(c, data, w);
        installNativeKernels(backend, { choice: 'native', threads: 1 });
        assert.ok(nativeKernelReport().kernels.includes('BatonLayerNorm'), 'fused kernels registered');
        const fused = valueAndGrads(c, data, w);
        const what = ['value', 'weighted sum', ...c.shapes.map((_, k) => `gradient ${k}`)];
        ref.forEach((r, k) => {
          const err = maxRelErr(fused[k]!, r);
          assert.ok(err < 2e-5, `${backend} ${c.name} ${what[k]}: relative error ${err}`);
        });
      }
    });
  }

  it('the fused gradients match central finite differences of the fused forward', async () => {
    await loadBackend({ force: 'cpu' });
    installNativeKernels('cpu', { choice: 'native', threads: 1 });
    for (const [i, c] of CASES.entries()) {
      const { data, w } = inputsOf(c, 30 + i);
      const [, , ...grads] = valueAndGrads(c, data, w);
      const h = 1e-2;
      for (const [k, x] of data.entries()) {
        for (const j of [0, Math.floor(x.length / 2), x.length - 1]) {
          const at = (d: number) => {
            const moved = data.map((a) => a.slice());
            moved[k]![j]! += d;
            return valueAndGrads(c, moved, w)[1]![0]!;
          };
          const fd = (at(h) - at(-h)) / (2 * h);
          const g = grads[k]![j]!;
          assert.ok(Math.abs(fd - g) <= 2e-2 * Math.max(1, Math.abs(g)), `${c.name} input ${k}[${j}]: ${g} vs ${fd}`);
        }
      }
    }
  });

  it('wasm: the embedding gradient (UnsortedSegmentSum) sums rows by id natively, dropping ids out of range', async () => {
    await loadBackend({ force: 'wasm' });
    installNativeKernels('wasm', { choice: 'native', threads: 1 });
    assert.ok(nativeKernelReport().kernels.includes('UnsortedSegmentSum'));
    const got = tf.tidy(() =>
      Array.from(
        tf
          .unsortedSegmentSum(
            tf.tensor2d([1, 2, 10, 20, 100, 200, 7, 7], [4, 2]),
            tf.tensor1d([2, 0, 2, 5], 'int32'),
            3,
          )
          .dataSync(),
      ),
    );
    assert.deepStrictEqual(got, [10, 20, 0, 0, 101, 202]);
  });

  for (const backend of ['wasm', 'cpu'] as const) {
    it(`${backend}: the embedding lookup (GatherV2 on axis 0) copies rows natively and equals tfjs's kernel, ids out of range included`, async () => {
      await loadBackend({ force: backend });
      const table = Float32Array.from({ length: 5 * 3 }, (_, i) => i * 0.5 - 2);
      const lookup = (ids: number[]) =>
        tf.tidy(() => {
          try {
            return Array.from(
              tf.gather(tf.tensor2d(table, [5, 3]), tf.tensor2d(ids, [2, ids.length / 2], 'int32')).dataSync(),
            );
          } catch (e) {
            return (e as Error).message;
          }
        });
      for (const ids of [
        [4, 0, 4, 2],
        [1, 7, 0, 0],
      ]) {
        installNativeKernels(backend, { choice: 'tfjs' });
        const ref = lookup(ids);
        installNativeKernels(backend, { choice: 'native', threads: 1 });
        assert.ok(nativeKernelReport().kernels.includes('GatherV2'));
        assert.deepStrictEqual(lookup(ids), ref, `ids ${ids}`);
      }
    });
  }

  it('with the tfjs or sgemm kernel set the ops decline and layers compose tfjs kernels', async () => {
    await loadBackend({ force: 'wasm' });
    for (const choice of ['tfjs', 'sgemm'] as const) {
      installNativeKernels('wasm', { choice });
      assert.ok(!nativeKernelReport().kernels.some((k) => (FUSED_KERNELS as string[]).includes(k)), choice);
      tf.tidy(() => {
        const x = tf.ones([2, 4, 4]);
        assert.strictEqual(fusedLayerNorm(x, tf.ones([4]), tf.zeros([4]), LAYER_NORM_EPS), null);
        assert.strictEqual(fusedGelu(x), null);
        assert.strictEqual(fusedCausalSoftmax(x, 1), null);
        assert.deepStrictEqual(causalSoftmax(x, 1).shape, [2, 4, 4]);
      });
    }
  });

  it('the native kernels refuse sizes whose product passes 2^64 instead of reading past the arrays', () => {
    const addon = require(ADDON_PATH) as Record<string, (...a: unknown[]) => unknown>;
    const f = () => new Float32Array(4);
    // 16·2^30·2^30 = 2^64 wraps to 0 in 64 bits, which any array length would pass.
    assert.throws(() => addon['causalSoftmax']!(f(), f(), 16, 2 ** 30, 1), /causalSoftmax.*arrays too short/);
    assert.throws(
      () => addon['causalSoftmaxGrad']!(f(), f(), f(), 16, 2 ** 30, 1),
      /causalSoftmaxGrad.*arrays too short/,
    );
    assert.throws(() => addon['layerNorm']!(f(), f(), f(), f(), 2 ** 30, 2 ** 30, 1e-5), /layerNorm.*arrays too short/);
    const ids = new Int32Array(4);
    assert.throws(() => addon['segmentSum']!(f(), ids, f(), 2, 2 ** 30, 2 ** 30), /segmentSum.*arrays too short/);
    assert.throws(() => addon['gatherRows']!(f(), ids, f(), 2, 2 ** 30, 2 ** 30), /gatherRows.*arrays too short/);
  });

  for (const backend of ['wasm', 'cpu'] as const) {
    it(`${backend}: GELU and the causal softmax of NaN and ±Infinity give what the tfjs composition gives`, async () => {
      await loadBackend({ force: backend });
      const x = [NaN, Infinity, -Infinity, 0, 1e30, -1e30, 100, -100, 1];
      // Score rows (causal: row i sees keys 0..i); the specials sit in the visible part.
      const s = [
        [0, 0, 0, 0],
        [Infinity, 1, 0, 0],
        [-Infinity, 1, 2, 0],
        [1, NaN, 2, 3],
      ].flat();
      // (A row whose visible keys are all -inf is 0/0 = NaN in the fused kernel; the composition's additive mask
      // then puts the row's weight on the masked keys instead. Neither is a softmax, so no such row here.)
      const s2 = [
        [2, -Infinity, 0, 0],
        [-Infinity, 3, 0, 0],
        [1e30, -1e30, 5, 0],
        [-100, 100, 0, -Infinity],
      ].flat();
      const both = () =>
        tf.tidy(() => [
          Array.from(gelu(tf.tensor1d(x)).dataSync()),
          Array.from(causalSoftmax(tf.tensor(s, [1, 4, 4]), 1).dataSync()),
          Array.from(causalSoftmax(tf.tensor(s2, [1, 4, 4]), 0.5).dataSync()),
        ]);
      installNativeKernels(backend, { choice: 'tfjs' });
      const ref = both();
      installNativeKernels(backend, { choice: 'native', threads: 1 });
      const fused = both();
      // A masked key (j > i) is never read by the fused kernel and is exactly 0 there; tfjs adds the mask to the
      // score, so a row holding NaN or +inf is NaN in its masked keys too. Those keys are compared as 0.
      const masked = (k: number, i: number) => k > 0 && i % 4 > Math.floor(i / 4);
      ref.forEach((r, k) =>
        r.forEach((v0, i) => {
          const got = fused[k]![i]!;
          const v = masked(k, i) ? 0 : v0;
          const same = Number.isNaN(v)
            ? Number.isNaN(got)
            : got === v || Math.abs(got - v) <= 1e-6 * Math.max(1, Math.abs(v));
          assert.ok(same, `${backend} case ${k} [${i}]: fused ${got}, tfjs ${v}`);
        }),
      );
    });
  }

  for (const backend of ['wasm', 'cpu'] as const) {
    it(`${backend}: a refused fused kernel call leaves no output behind in the backend`, async () => {
      await loadBackend({ force: backend });
      installNativeKernels(backend, { choice: 'native', threads: 1 });
      const x = tf.ones([4, 8]);
      const xi = tf.ones([4, 8], 'int32');
      const g = tf.ones([8]);
      const short = tf.ones([2, 8]);
      const held = () => ({ ...tf.memory(), ids: tf.backend().numDataIds() });
      const before = held();
      const run = (name: string, inputs: tf.NamedTensorMap) => () =>
        tf.engine().runKernel(name, inputs, { eps: 1e-5 } as unknown as tf.NamedAttrMap);
      assert.throws(run('BatonGelu', { x: xi }), /BatonGelu: inputs must be float32/);
      assert.throws(run('BatonLayerNormGradParams', { dy: xi, x }), /inputs must be float32/);
      assert.throws(run('BatonLayerNormGradX', { dy: short, x, g }), /layerNormGradX.*arrays too short/);
      const after = held();
      assert.deepStrictEqual(
        [after.numTensors, after.numBytes, after.ids],
        [before.numTensors, before.numBytes, before.ids],
      );
      tf.dispose([x, xi, g, short]);
    });
  }

  it("LayerNorm's backward computes dg and db in one kernel call and holds no tensor after it", async () => {
    await loadBackend({ force: 'wasm' });
    installNativeKernels('wasm', { choice: 'native', threads: 1 });
    const [x, g, b] = [tf.randomNormal([4, 8], 0, 1, 'float32', 1), tf.ones([8]), tf.zeros([8])];
    /** The gradients for the first n of x, g, b (the rest held constant). */
    const grads = (n: number) => () =>
      tf.tidy(() =>
        tf.grads((...ys: tf.Tensor[]) => {
          const [a, c, e] = [...ys, ...[x, g, b].slice(n)];
          return layerNorm(a!, c!, e!).square().sum();
        })([x, g, b].slice(0, n)),
      );
    const before = tf.memory().numTensors;
    const profile = await tf.profile(() => void tf.dispose(grads(3)()));
    assert.strictEqual(profile.kernels.filter((k) => k.name === 'BatonLayerNormGradParams').length, 1);
    assert.strictEqual(tf.memory().numTensors, before);
    // Only g asked for: b's gradient, computed with it, is dropped at the next backward.
    tf.dispose(grads(2)());
    tf.dispose(grads(1)());
    assert.strictEqual(tf.memory().numTensors, before);
    tf.dispose([x, g, b]);
  });

  it('the fused ops decline inputs they do not handle (non-float, non-square scores, broadcast gains)', async () => {
    await loadBackend({ force: 'wasm' });
    installNativeKernels('wasm', { choice: 'native', threads: 1 });
    tf.tidy(() => {
      assert.strictEqual(fusedCausalSoftmax(tf.ones([2, 3, 4]), 1), null);
      assert.strictEqual(fusedGelu(tf.ones([3], 'int32')), null);
      assert.strictEqual(fusedLayerNorm(tf.ones([2, 4]), tf.ones([1]), tf.zeros([4]), 1e-5), null);
      assert.notStrictEqual(fusedGelu(tf.ones([3])), null);
    });
  });
});
