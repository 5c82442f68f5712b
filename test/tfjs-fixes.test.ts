import * as assert from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { installWasmFixes, removeWasmFixes, transposePlan } from '../models/tfjs-fixes';
import { SeededRandom } from '../models/seeded-init';
import { gptSpec } from '../models/gpt';
import { buildFullModel } from '../models/partition';
import { valuesOfShape } from './helpers-values';

type Backend = 'cpu' | 'wasm';

async function on<T>(backend: Backend, f: () => T): Promise<T> {
  await loadBackend({ force: backend });
  return f();
}

function assertNear(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  rtol: number,
  what: string,
  floor = 0,
): void {
  assert.strictEqual(actual.length, expected.length, `${what}: length`);
  let peak = floor;
  for (let i = 0; i < expected.length; i++) peak = Math.max(peak, Math.abs(expected[i]!));
  for (let i = 0; i < expected.length; i++) {
    // Relative to the element, with the peak as floor (summation order differs between backends).
    const tol = rtol * Math.max(Math.abs(expected[i]!), peak);
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `${what}[${i}]: wasm ${actual[i]}, cpu ${expected[i]}`);
  }
}

const FLAGS: Array<[boolean, boolean]> = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
];
// [batchA, batchB, m, k, n]: a is (batchA, m, k) before transposition, b is (batchB, k, n).
const SHAPES: Array<[number[], number[], number, number, number]> = [
  [[], [], 5, 7, 3],
  [[2, 3], [2, 3], 4, 5, 6],
  [[2], [], 4, 5, 6], // b broadcast over a's batch
  [[3], [3], 2, 8, 64], // small a, large b: the swapped product moves fewer elements
  [[], [], 64, 8, 2],
];

function physical(batch: number[], rows: number, cols: number, transposed: boolean): number[] {
  return transposed ? [...batch, cols, rows] : [...batch, rows, cols];
}

/** Operands of a (batched) matMul of shape [m, k] × [k, n] as laid out under the transpose flags, values a then b from rng. */
function operands(
  rng: SeededRandom,
  [batchA, batchB, m, k, n]: readonly [number[], number[], number, number, number],
  tA: boolean,
  tB: boolean,
  integers: boolean,
): { aShape: number[]; bShape: number[]; av: Float32Array; bv: Float32Array } {
  const aShape = physical(batchA, m, k, tA);
  const bShape = physical(batchB, k, n, tB);
  const av = valuesOfShape(rng, aShape, integers);
  const bv = valuesOfShape(rng, bShape, integers);
  return { aShape, bShape, av, bv };
}

describe('tfjs-fixes: wasm kernels', () => {
  before(async () => {
    await loadBackend({ force: 'wasm' });
    installWasmFixes();
  });
  after(async () => {
    await loadBackend({ force: 'cpu' });
  });

  it('matMul with every transpose flag combination and batch dims equals the cpu backend', async () => {
    const plans = new Set<string>();
    for (const integers of [true, false]) {
      for (const [batchA, batchB, m, k, n] of SHAPES) {
        for (const [tA, tB] of FLAGS) {
          const rng = new SeededRandom(m * 1000 + k * 10 + n);
          const { aShape, bShape, av, bv } = operands(rng, [batchA, batchB, m, k, n], tA, tB, integers);
          plans.add(transposePlan(aShape, bShape, tA, tB));
          const run = () => tf.tidy(() => tf.matMul(tf.tensor(av, aShape), tf.tensor(bv, bShape), tA, tB).dataSync());
          const cpu = await on('cpu', run);
          const wasm = await on('wasm', run);
          // Small integers multiply and add exactly in float32, in any order.
          assertNear(wasm, cpu, integers ? 0 : 1e-6, `a=[${aShape}] b=[${bShape}] tA=${tA} tB=${tB}`);
        }
      }
    }
    assert.deepStrictEqual([...plans].sort(), ['none', 'operands', 'swap'], 'both rewrite strategies were exercised');
  });

  it('matMul gradients (which use the flags) equal the cpu backend', async () => {
    // tfjs's matMul gradient does not support broadcast batch dims on any backend.
    for (const [batchA, batchB, m, k, n] of SHAPES.filter(([ba, bb]) => ba.length === bb.length)) {
      for (const [tA, tB] of FLAGS) {
        const rng = new SeededRandom(7 + m + k + n);
        const { aShape, bShape, av, bv } = operands(rng, [batchA, batchB, m, k, n], tA, tB, false);
        const run = () =>
          tf.tidy(() => {
            const [ga, gb] = tf.grads((a: tf.Tensor, b: tf.Tensor) => tf.matMul(a, b, tA, tB).square().sum())([
              tf.tensor(av, aShape),
              tf.tensor(bv, bShape),
            ]);
            return [ga!.dataSync(), gb!.dataSync()];
          });
        const cpu = await on('cpu', run);
        const wasm = await on('wasm', run);
        assertNear(wasm[0]!, cpu[0]!, 1e-6, `d/da a=[${aShape}] b=[${bShape}] tA=${tA} tB=${tB}`);
        assertNear(wasm[1]!, cpu[1]!, 1e-6, `d/db a=[${aShape}] b=[${bShape}] tA=${tA} tB=${tB}`);
      }
    }
  });

  it('sums over leading axes (bias gradients) equal the cpu backend, and other reductions are untouched', async () => {
    // Small integers add exactly in float32 in any order, so the comparison can be exact.
    const rng = new SeededRandom(4);
    const x = valuesOfShape(rng, [3, 5, 7], true);
    const cases: Array<[number | number[], boolean]> = [
      [0, false],
      [[0, 1], false],
      [[1, 0], true],
      [-3, true],
      [2, false],
      [[1, 2], false],
      [[0, 1, 2], false],
      [1, true],
    ];
    for (const [axis, keepDims] of cases) {
      const run = () =>
        tf.tidy(() => {
          const s = tf.sum(tf.tensor(x, [3, 5, 7]), axis, keepDims);
          return { shape: s.shape, data: s.dataSync() };
        });
      const cpu = await on('cpu', run);
      const wasm = await on('wasm', run);
      assert.deepStrictEqual(wasm.shape, cpu.shape, `axis ${JSON.stringify(axis)} keepDims=${keepDims}: shape`);
      assertNear(wasm.data, cpu.data, 0, `sum axis ${JSON.stringify(axis)} keepDims=${keepDims}`);
    }
  });

  it('the gradient of gather (an embedding lookup with repeated ids) equals the cpu backend', async () => {
    const rng = new SeededRandom(3);
    const table = valuesOfShape(rng, [10, 4], false);
    const ids = [1, 1, 3, 9, 0, 1, 3, 3];
    const weights = valuesOfShape(rng, [8, 4], false);
    const run = () =>
      tf.tidy(() => {
        const [g] = tf.grads((w: tf.Tensor) =>
          tf
            .gather(w, tf.tensor(ids, [2, 4], 'int32'))
            .mul(tf.tensor(weights, [2, 4, 4]))
            .sum(),
        )([tf.tensor(table, [10, 4])]);
        return g!.dataSync();
      });
    const cpu = await on('cpu', run);
    const wasm = await on('wasm', run);
    assertNear(wasm, cpu, 1e-6, 'embedding gradient');
    // Rows never looked up get exactly zero gradient.
    for (const row of [2, 4, 5, 6, 7, 8])
      assert.deepStrictEqual(Array.from(wasm.slice(row * 4, row * 4 + 4)), [0, 0, 0, 0]);
  });

  it('unsortedSegmentSum drops ids outside [0, numSegments) like the cpu backend', async () => {
    const x = Float32Array.from({ length: 6 * 2 }, (_, i) => i + 0.5);
    const run = () =>
      tf.tidy(() =>
        tf.unsortedSegmentSum(tf.tensor(x, [6, 2]), tf.tensor([0, 2, -1, 2, 5, 0], [6], 'int32'), 3).dataSync(),
      );
    const cpu = await on('cpu', run);
    const wasm = await on('wasm', run);
    assert.deepStrictEqual(Array.from(wasm), Array.from(cpu));
    assert.deepStrictEqual(Array.from(wasm), [0.5 + 10.5, 1.5 + 11.5, 0, 0, 2.5 + 6.5, 3.5 + 7.5]);
  });

  it('without the fixes, training an embedding on wasm fails (the bug the fix removes)', async () => {
    await loadBackend({ force: 'wasm' });
    removeWasmFixes();
    try {
      assert.throws(
        () =>
          tf.tidy(() =>
            tf.grads((w: tf.Tensor) => tf.gather(w, tf.tensor([1], [1], 'int32')).sum())([tf.ones([3, 2])]),
          ),
        /UnsortedSegmentSum/,
      );
    } finally {
      installWasmFixes();
    }
  });

  it('a tiny GPT gets the same loss and gradients on wasm as on cpu', async () => {
    const spec = gptSpec({ vocabSize: 11, seqLen: 8, layers: 2, width: 16, heads: 4, seed: 9, initStd: 0.2 });
    const rng = new SeededRandom(1);
    const ids = Array.from({ length: 16 }, () => rng.int(11));
    const tg = Array.from({ length: 16 }, () => rng.int(11));
    const run = () => {
      const model = buildFullModel(spec);
      const res = model.backward(tf.tensor(ids, [2, 8], 'int32'), null, {
        targets: tf.tensor(tg, [2, 8], 'int32'),
        lossScale: 1,
      });
      const out = { loss: res.loss!, grads: res.paramGrads.map((g) => g.dataSync()) };
      tf.dispose(res.paramGrads);
      model.dispose();
      return out;
    };
    const cpu = await on('cpu', run);
    const wasm = await on('wasm', run);
    assert.ok(Math.abs(wasm.loss - cpu.loss) <= 1e-6 * cpu.loss, `loss: wasm ${wasm.loss}, cpu ${cpu.loss}`);
    // The key bias gets a zero gradient in exact arithmetic (softmax ignores a per-row
    // shift), so every tensor is compared relative to the largest gradient anywhere too.
    const peak = Math.max(...cpu.grads.map((g) => Math.max(...Array.from(g as Float32Array, Math.abs))));
    cpu.grads.forEach((g, i) => assertNear(wasm.grads[i]!, g, 1e-4, `gradient ${i}`, peak * 1e-2));
  });

  it('prints transposed matMul timings before and after the fix', async () => {
    await loadBackend({ force: 'wasm' });
    const a = tf.randomNormal([256, 512]);
    const b = tf.randomNormal([256, 512]);
    const time = () => {
      tf.matMul(a, b, false, true).dispose();
      const t0 = performance.now();
      for (let i = 0; i < 3; i++) tf.matMul(a, b, false, true).dispose();
      return (performance.now() - t0) / 3;
    };
    removeWasmFixes();
    const before = time();
    installWasmFixes();
    const after = time();
    console.log(
      `      wasm matMul (256x512)·(256x512)ᵀ: ${before.toFixed(1)} ms with the flag, ${after.toFixed(1)} ms with the fix`,
    );
    tf.dispose([a, b]);
  });
});
