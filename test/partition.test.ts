import * as assert from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { gptSpec } from '../models/gpt';
import { mlpLmSpec } from '../models/mlp-lm';
import { buildFullModel, buildStages, formatPlan, PartitionError, planPartition } from '../models/partition';
import { SeededRandom } from '../models/seeded-init';
import type { ModelSpec } from '../models/stage-module';

const gpt8 = () => gptSpec({ vocabSize: 9, seqLen: 6, layers: 8, width: 8, heads: 2, seed: 4, initStd: 0.2 });
const mlp8 = () =>
  mlpLmSpec({ vocabSize: 9, window: 4, embedWidth: 4, width: 8, hidden: 16, layers: 8, seed: 4, initStd: 0.2 });

function batchFor(spec: ModelSpec): { input: tf.Tensor; targets: tf.Tensor } {
  const rng = new SeededRandom(21);
  const gen = (n: number) => Array.from({ length: n }, () => rng.int(9));
  return spec.name === 'gpt'
    ? { input: tf.tensor(gen(12), [2, 6], 'int32'), targets: tf.tensor(gen(12), [2, 6], 'int32') }
    : { input: tf.tensor(gen(12), [3, 4], 'int32'), targets: tf.tensor(gen(3), [3], 'int32') };
}

function assertAllClose(actual: tf.Tensor, expected: tf.Tensor, rtol: number, what: string): void {
  const a = actual.dataSync();
  const e = expected.dataSync();
  assert.deepStrictEqual(actual.shape, expected.shape, `${what}: shape`);
  let peak = 0;
  for (let i = 0; i < e.length; i++) peak = Math.max(peak, Math.abs(e[i]!));
  for (let i = 0; i < e.length; i++) {
    const tol = rtol * Math.abs(e[i]!) + 1e-7 * peak;
    assert.ok(Math.abs(a[i]! - e[i]!) <= tol, `${what}[${i}]: chained ${a[i]}, full ${e[i]}`);
  }
}

describe('partition: cutting a model into P × V stage modules', () => {
  before(async () => {
    await loadBackend({ force: 'cpu' });
  });

  for (const [label, make] of [
    ['char-GPT', gpt8],
    ['MLP LM', mlp8],
  ] as const) {
    for (const P of [1, 2, 4]) {
      for (const V of [1, 2]) {
        it(`${label}, P=${P} V=${V}: chained stage modules give the full model's loss and every gradient`, () => {
          const spec = make();
          const { input, targets } = batchFor(spec);
          const lossScale = 0.25;
          const full = buildFullModel(spec);
          const ref = full.backward(input, null, { targets, lossScale });

          const stages = buildStages(spec, planPartition(spec, { stages: P, chunks: V }));
          const inputs: tf.Tensor[] = [input];
          for (const s of stages.slice(0, -1)) inputs.push(s.forward(inputs[inputs.length - 1]!));
          const grads = new Map<string, tf.Tensor>();
          let dy: tf.Tensor | null = null;
          let loss: number | undefined;
          for (let v = stages.length - 1; v >= 0; v--) {
            const s = stages[v]!;
            const res = s.backward(inputs[v]!, dy, s.isLast ? { targets, lossScale } : {});
            if (s.isLast) loss = res.loss;
            s.paramNames().forEach((n, i) => grads.set(n, res.paramGrads[i]!));
            dy?.dispose();
            dy = res.gradInput;
          }
          assert.strictEqual(dy, null);
          assert.ok(
            Math.abs(loss! - ref.loss!) <= 1e-5 * Math.abs(ref.loss!),
            `loss: chained ${loss}, full ${ref.loss}`,
          );
          assert.deepStrictEqual(
            stages.flatMap((s) => s.paramNames()),
            full.paramNames(),
            'stages cover every parameter once, in order',
          );
          full.paramNames().forEach((n, i) => assertAllClose(grads.get(n)!, ref.paramGrads[i]!, 1e-5, n));

          tf.dispose([...inputs, targets, ...grads.values(), ...ref.paramGrads]);
          stages.forEach((s) => s.dispose());
          full.dispose();
        });
      }
    }
  }

  it('places embedding on v=0, the head on the last virtual stage, and v = chunk*P + stage', () => {
    const plan = planPartition(gpt8(), { stages: 2, chunks: 2 });
    assert.deepStrictEqual(
      plan.virtual.map((v) => [v.virtualStage, v.stage, v.chunk, v.hasEmbed, v.hasHead]),
      [
        [0, 0, 0, true, false],
        [1, 1, 0, false, false],
        [2, 0, 1, false, false],
        [3, 1, 1, false, true],
      ],
    );
    assert.deepStrictEqual(
      plan.virtual.map((v) => [v.blockStart, v.blockEnd]),
      [
        [0, 2],
        [2, 4],
        [4, 6],
        [6, 8],
      ],
    );
    const names = buildStages(gpt8(), plan).map((s) => {
      s.dispose();
      return s.name;
    });
    assert.deepStrictEqual(names, ['gpt[embed, h0..h1]', 'gpt[h2..h3]', 'gpt[h4..h5]', 'gpt[h6..h7, head]']);
  });

  it('the cut points minimise the slowest virtual stage (checked against every possible cut)', () => {
    // Uneven block costs: a synthetic spec whose blocks cost 1..9 (as FLOPs).
    const base = gpt8();
    const costs = [5, 1, 9, 2, 2, 7, 3, 4];
    const spec: ModelSpec = {
      ...base,
      blocks: base.blocks.map((b, i) => ({ ...b, flopsPerSample: costs[i]! })),
      embed: { ...base.embed, flopsPerSample: 3 },
      head: { ...base.head, flopsPerSample: 6 },
    };
    for (const [P, V, weights] of [
      [3, 1, [1, 1, 1]],
      [2, 2, [1, 3]],
      [4, 1, [2, 1, 1, 1]],
    ] as const) {
      const plan = planPartition(spec, { stages: P, chunks: V, weights: [...weights] });
      const got = Math.max(...plan.virtual.map((v) => v.weightedCost));
      // Brute force over all placements of S-1 cuts among 7 gaps.
      const S = P * V;
      let best = Infinity;
      const walk = (v: number, start: number, worst: number) => {
        if (v === S - 1) {
          const c = costs.slice(start).reduce((a, b) => a + b, 0) + 6 + (S === 1 ? 3 : 0);
          best = Math.min(best, Math.max(worst, c / weights[v % P]!));
          return;
        }
        for (let end = start + 1; end <= costs.length - (S - 1 - v); end++) {
          const c = costs.slice(start, end).reduce((a, b) => a + b, 0) + (v === 0 ? 3 : 0);
          walk(v + 1, end, Math.max(worst, c / weights[v % P]!));
        }
      };
      walk(0, 0, 0);
      assert.strictEqual(
        got,
        best,
        `P=${P} V=${V} weights=[${weights}]: plan's slowest stage ${got}, optimum ${best}\n${formatPlan(plan)}`,
      );
    }
  });

  it('gives a stage twice as fast about twice the blocks', () => {
    const spec = mlpLmSpec({ vocabSize: 9, window: 4, embedWidth: 4, width: 64, hidden: 256, layers: 12 });
    const even = planPartition(spec, { stages: 2 });
    const uneven = planPartition(spec, { stages: 2, weights: [2, 1] });
    const blocks = (p: typeof even) => p.virtual.map((v) => v.blockEnd - v.blockStart);
    assert.deepStrictEqual(blocks(even), [6, 6]);
    assert.deepStrictEqual(blocks(uneven), [8, 4]);
  });

  it('reports FLOPs per virtual stage that add up to the model total', () => {
    const spec = gpt8();
    const plan = planPartition(spec, { stages: 4, chunks: 2 });
    const total =
      spec.embed.flopsPerSample + spec.head.flopsPerSample + spec.blocks.reduce((s, b) => s + b.flopsPerSample, 0);
    assert.strictEqual(
      plan.virtual.reduce((s, v) => s + v.flopsPerSample, 0),
      total,
    );
    const table = formatPlan(plan);
    assert.match(table, /^gpt: P=4 V=2 weights=\[1, 1, 1, 1\]/);
    assert.match(table, /v7 \(stage 3, chunk 1\): h7 head {2}[\d.]+ MFLOP\/sample/);
  });

  it('refuses fewer blocks than virtual stages, bad weights and bad counts, saying which', () => {
    assert.throws(
      () => planPartition(gpt8(), { stages: 4, chunks: 3 }),
      (e: Error) =>
        e instanceof PartitionError && /8 blocks cannot fill 12 virtual stages \(P=4 × V=3\)/.test(e.message),
    );
    assert.throws(() => planPartition(gpt8(), { stages: 2, weights: [1] }), /1 stage weights for 2 stages/);
    assert.throws(
      () => planPartition(gpt8(), { stages: 2, weights: [1, 0] }),
      /weight of stage 1 must be a positive number, got 0/,
    );
    assert.throws(() => planPartition(gpt8(), { stages: 0 }), /stages must be a positive integer, got 0/);
  });
});

describe('recompute-aware partitioning', () => {
  it('gives the last stage more blocks when the others run their forward twice', () => {
    const spec = gptSpec({ layers: 7, width: 32, heads: 2, seqLen: 16 });
    const flat = planPartition(spec, { stages: 2 });
    const aware = planPartition(spec, { stages: 2, recomputedForward: true });
    const blocks = (p: ReturnType<typeof planPartition>) => p.virtual.map((v) => v.blockEnd - v.blockStart);
    assert.deepEqual(blocks(flat), [4, 3]);
    assert.deepEqual(blocks(aware), [3, 4]);
  });
});
