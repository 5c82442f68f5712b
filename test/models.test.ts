import * as assert from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { installNativeKernels } from '../models/native-kernels';
import { gptSpec } from '../models/gpt';
import { mlpLmSpec } from '../models/mlp-lm';
import { buildFullModel, buildStages, planPartition } from '../models/partition';
import { SeededRandom } from '../models/seeded-init';
import type { ModelSpec, StageModule } from '../models/stage-module';
import { loadCorpus, toTensors } from '../models/data';

/** A first stage gives no input gradient; any other gives the one `expected` holds. */
function assertInputGradient(
  s: { readonly isFirst: boolean; readonly name: string },
  actual: tf.Tensor | null,
  expected: tf.Tensor | null,
): void {
  if (s.isFirst) assert.strictEqual(actual, null);
  else
    assert.deepStrictEqual(
      Array.from(actual!.dataSync()),
      Array.from(expected!.dataSync()),
      `${s.name}: input gradient`,
    );
}

// Tiny models with a large init so every nonlinearity is exercised.
const tinyGpt = (layers: number) =>
  gptSpec({ vocabSize: 7, seqLen: 5, layers, width: 8, heads: 2, seed: 3, initStd: 0.3 });
const tinyMlp = (layers: number) =>
  mlpLmSpec({ vocabSize: 7, window: 3, embedWidth: 4, width: 8, hidden: 12, layers, seed: 3, initStd: 0.3 });

interface Case {
  spec: ModelSpec;
  input: () => tf.Tensor;
  targets: () => tf.Tensor;
}

function ints(rng: SeededRandom, n: number, bound: number): number[] {
  return Array.from({ length: n }, () => rng.int(bound));
}

function gptCase(layers: number): Case {
  const rng = new SeededRandom(11);
  const ids = ints(rng, 2 * 5, 7);
  const tg = ints(rng, 2 * 5, 7);
  return {
    spec: tinyGpt(layers),
    input: () => tf.tensor(ids, [2, 5], 'int32'),
    targets: () => tf.tensor(tg, [2, 5], 'int32'),
  };
}

function mlpCase(layers: number): Case {
  const rng = new SeededRandom(12);
  const ids = ints(rng, 3 * 3, 7);
  const tg = ints(rng, 3, 7);
  return {
    spec: tinyMlp(layers),
    input: () => tf.tensor(ids, [3, 3], 'int32'),
    targets: () => tf.tensor(tg, [3], 'int32'),
  };
}

function randomLike(rng: SeededRandom, shape: number[]): tf.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return tf.tensor(
    Float32Array.from({ length: n }, () => rng.normal()),
    shape,
    'float32',
  );
}

/** A random direction of unit norm. */
function direction(rng: SeededRandom, shape: number[]): tf.Tensor {
  const u = Float64Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.normal());
  const norm = Math.sqrt(u.reduce((s, x) => s + x * x, 0));
  return tf.tensor(
    Float32Array.from(u, (x) => x / norm),
    shape,
    'float32',
  );
}

function dot(a: tf.Tensor, b: tf.Tensor): number {
  const x = a.dataSync();
  const y = b.dataSync();
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]! * y[i]!;
  return s;
}

/** Mean cross-entropy computed in float64 from float32 logits. */
function crossEntropy64(logits: tf.Tensor, targets: tf.Tensor): number {
  const v = logits.shape[logits.shape.length - 1]!;
  const z = logits.dataSync();
  const t = targets.dataSync();
  let total = 0;
  for (let r = 0; r < t.length; r++) {
    let max = -Infinity;
    for (let j = 0; j < v; j++) max = Math.max(max, z[r * v + j]!);
    let s = 0;
    for (let j = 0; j < v; j++) s += Math.exp(z[r * v + j]! - max);
    total += Math.log(s) + max - z[r * v + t[r]!]!;
  }
  return total / t.length;
}

/**
 * Objective of a stage in float64: the loss (last stage) or <output, R>. Only the float32
 * forward pass is approximate. Central differences along a unit-norm random direction,
 * Richardson-extrapolated from steps FD_STEP and FD_STEP/2 (truncation error O(h⁴)),
 * resolve directional derivatives to about 1e-4 relative; a gradient off by 1% fails
 * the check by a factor of 6 (see the test that guards the tolerance).
 */
function objective(
  stage: StageModule,
  input: tf.Tensor,
  params: tf.Tensor[],
  r: tf.Tensor | null,
  targets: tf.Tensor,
): number {
  const out = stage.forward(input, params);
  const value = stage.isLast ? crossEntropy64(out, targets) : dot(out, r!);
  out.dispose();
  return value;
}

const FD_STEP = 0.05;

function directional(f: (step: number) => number, eps: number): number {
  const d = (h: number) => (f(h) - f(-h)) / (2 * h);
  return (4 * d(eps / 2) - d(eps)) / 3;
}

function assertClose(actual: number, expected: number, scale: number, what: string): void {
  const err = Math.abs(actual - expected);
  assert.ok(
    err <= 1e-3 * Math.abs(expected) + 2e-5 * scale,
    `${what}: finite differences give ${actual}, backward gives ${expected} (error ${err.toExponential(2)})`,
  );
}

/** Checks every parameter's and the input's gradient of one stage along random directions. */
function checkStage(stage: StageModule, input: tf.Tensor, targets: tf.Tensor, seed: number): void {
  const rng = new SeededRandom(seed);
  const params = stage.params().map((p) => p.clone());
  const out = stage.forward(input);
  const r = stage.isLast ? null : randomLike(rng, out.shape);
  out.dispose();
  const lossScale = 0.5;
  const res = stage.backward(input, r, { targets, lossScale });
  const scale = stage.isLast ? lossScale : 1;

  params.forEach((p, k) => {
    const u = direction(rng, p.shape);
    const unorm = Math.sqrt(dot(u, u));
    const fd = directional((h) => {
      const moved = params.map((q, i) => (i === k ? q.add(u.mul(h)) : q));
      const v = objective(stage, input, moved, r, targets);
      moved[k]!.dispose();
      return v;
    }, FD_STEP);
    const an = dot(res.paramGrads[k]!, u) / scale;
    const gnorm = Math.sqrt(dot(res.paramGrads[k]!, res.paramGrads[k]!)) / scale;
    assertClose(fd, an, gnorm * unorm + 1, `${stage.name} ${stage.paramNames()[k]}`);
    u.dispose();
  });
  if (!stage.isFirst) {
    const u = direction(rng, input.shape);
    const fd = directional((h) => {
      const moved = input.add(u.mul(h));
      const v = objective(stage, moved, params, r, targets);
      moved.dispose();
      return v;
    }, FD_STEP);
    const an = dot(res.gradInput!, u) / scale;
    assertClose(fd, an, Math.sqrt(dot(res.gradInput!, res.gradInput!) * dot(u, u)) / scale + 1, `${stage.name} input`);
    u.dispose();
  } else {
    assert.strictEqual(res.gradInput, null, 'the first stage returns no input gradient');
  }
  tf.dispose([...params, ...res.paramGrads, res.gradInput ?? [], r ?? []]);
}

describe('models: stage modules', () => {
  // tfjs's own kernels: the tolerance below is set by their float32 rounding of the forward
  // (native kernels round otherwise; test/native-kernels.test.ts checks them against these).
  before(async () => {
    await loadBackend({ force: 'cpu' });
    installNativeKernels('cpu', { choice: 'tfjs' });
  });
  after(() => {
    installNativeKernels('cpu');
  });

  for (const [label, make, batch, seq] of [
    ['char-GPT', gptCase, 2, 5],
    ['MLP LM', mlpCase, 3, 3],
  ] as const) {
    it(`${label}: what flows between stages has the spec's hiddenShape (receivers check arrivals against it)`, () => {
      const c = make(3);
      const stages = buildStages(c.spec, planPartition(c.spec, { stages: 3 }));
      let x = c.input();
      for (const stage of stages.slice(0, -1)) {
        const next = stage.forward(x);
        x.dispose();
        x = next;
        assert.deepStrictEqual(x.shape, c.spec.hiddenShape(batch, seq));
      }
      x.dispose();
      stages.forEach((s) => s.dispose());
    });
  }

  for (const [label, make] of [
    ['char-GPT', gptCase],
    ['MLP LM', mlpCase],
  ] as const) {
    it(`${label}: every stage's parameter and input gradients match finite differences`, () => {
      const c = make(3);
      const stages = buildStages(c.spec, planPartition(c.spec, { stages: 3 }));
      const targets = c.targets();
      let x = c.input();
      stages.forEach((stage, s) => {
        checkStage(stage, x, targets, 100 + s);
        const next = stage.isLast ? x : stage.forward(x);
        if (next !== x) x.dispose();
        x = next;
      });
      x.dispose();
      targets.dispose();
      stages.forEach((s) => s.dispose());
    });
  }

  it('the finite-difference check rejects a gradient that is off by 1%', () => {
    // Guards the tolerance: a real scaling bug must not slip through.
    const c = gptCase(1);
    const model = buildFullModel(c.spec);
    const input = c.input();
    const targets = c.targets();
    const res = model.backward(input, null, { targets, lossScale: 1 });
    const k = model.paramNames().indexOf('gpt.h0.mlp.w1');
    const u = direction(new SeededRandom(5), model.params()[k]!.shape);
    const params = model.params().map((p) => p.clone());
    const fd = directional((h) => {
      const moved = params.map((q, i) => (i === k ? q.add(u.mul(h)) : q));
      return objective(model, input, moved, null, targets);
    }, FD_STEP);
    const an = dot(res.paramGrads[k]!, u);
    const gn = Math.sqrt(dot(res.paramGrads[k]!, res.paramGrads[k]!) * dot(u, u));
    assertClose(fd, an, gn + 1, 'exact gradient');
    assert.throws(() => assertClose(fd, an * 1.01, gn + 1, 'gradient × 1.01'), /finite differences/);
    model.dispose();
  });

  it('lossScale scales the last stage gradients and not the reported loss', () => {
    const c = mlpCase(2);
    const model = buildFullModel(c.spec);
    const [input, targets] = [c.input(), c.targets()];
    const a = model.backward(input, null, { targets, lossScale: 1 });
    const b = model.backward(input, null, { targets, lossScale: 0.25 });
    assert.strictEqual(a.loss, b.loss);
    const lossTensor = model.loss(input, targets);
    assert.ok(Math.abs(lossTensor.dataSync()[0]! - a.loss!) < 1e-6);
    a.paramGrads.forEach((g, i) => {
      const diff = tf.max(tf.abs(g.mul(0.25).sub(b.paramGrads[i]!))).dataSync()[0]!;
      assert.ok(
        diff <= 1e-7 * (1 + tf.max(tf.abs(g)).dataSync()[0]!),
        `${model.paramNames()[i]}: scaled gradient differs by ${diff}`,
      );
    });
    assert.throws(() => model.backward(input, null, { targets }), /lossScale/);
    assert.throws(() => model.backward(input, null, { lossScale: 1 }), /targets/);
    model.dispose();
  });

  for (const [label, make] of [
    ['gpt', () => gptCase(3)],
    ['mlp', () => mlpCase(3)],
  ] as const) {
    it(`${label}: backward from a kept forward equals the recomputing backward (tf.grads), for first and middle stages`, () => {
      const c = make();
      const stages = buildStages(c.spec, planPartition(c.spec, { stages: 3 }));
      const rng = new SeededRandom(5);
      const input0 = c.input();
      const h0 = stages[0]!.forward(input0);
      for (const [s, x] of [
        [stages[0]!, input0],
        [stages[1]!, h0],
      ] as const) {
        const y = s.forward(x);
        const dy = randomLike(rng, y.shape);
        const kept = s.forwardKeepingActivations(x);
        assert.deepStrictEqual(
          Array.from(kept.output.dataSync()),
          Array.from(y.dataSync()),
          `${s.name}: same forward output`,
        );
        kept.output.dispose();
        const fromTape = s.backward(x, dy, { kept });
        const recomputed = s.backward(x, dy);
        assertInputGradient(s, fromTape.gradInput, recomputed.gradInput);
        recomputed.paramGrads.forEach((g, i) =>
          assert.deepStrictEqual(
            Array.from(fromTape.paramGrads[i]!.dataSync()),
            Array.from(g.dataSync()),
            `${s.name}: ${s.paramNames()[i]}`,
          ),
        );
        assert.throws(() => s.backward(x, dy, { kept }), /already used or released/);
        tf.dispose([
          y,
          dy,
          fromTape.gradInput ?? [],
          recomputed.gradInput ?? [],
          ...fromTape.paramGrads,
          ...recomputed.paramGrads,
        ]);
      }
      assert.throws(() => stages[2]!.forwardKeepingActivations(h0), /last stage/);
      stages.forEach((s) => s.dispose());
    });
  }

  for (const [label, make] of [
    ['gpt', () => gptCase(3)],
    ['mlp', () => mlpCase(3)],
  ] as const) {
    it(`${label}: a split backward from the kept forward (B input half, W weight half later) is bitwise the whole backward, on first, middle and last stages, and leaks nothing`, () => {
      const c = make();
      const stages = buildStages(c.spec, planPartition(c.spec, { stages: 3 }));
      const rng = new SeededRandom(7);
      const input0 = c.input();
      const h0 = stages[0]!.forward(input0);
      const h1 = stages[1]!.forward(h0);
      const targets = c.targets();
      const lossScale = 0.25;
      for (const [s, x] of [
        [stages[0]!, input0],
        [stages[1]!, h0],
        [stages[2]!, h1],
      ] as const) {
        const y = s.isLast ? null : s.forward(x);
        const dy = y ? randomLike(rng, y.shape) : null;
        const whole = s.backward(x, dy, { targets, lossScale });
        const before = tf.memory().numTensors;
        const kept = s.isLast ? undefined : s.forwardKeepingActivations(x);
        kept?.output.dispose();
        const b = s.backwardInput(x, dy, { kept, targets, lossScale });
        assertInputGradient(s, b.gradInput, whole.gradInput);
        if (s.isLast) {
          const l = s.loss(x, targets);
          assert.strictEqual(b.loss, l.dataSync()[0], `${s.name}: loss`);
          l.dispose();
        }
        const w = s.backwardWeights(b.deferred);
        whole.paramGrads.forEach((g, i) =>
          assert.deepStrictEqual(
            Array.from(w[i]!.dataSync()),
            Array.from(g.dataSync()),
            `${s.name}: ${s.paramNames()[i]}`,
          ),
        );
        assert.throws(() => s.backwardWeights(b.deferred), /already computed or released/);
        tf.dispose([b.gradInput ?? [], ...w]);
        assert.strictEqual(tf.memory().numTensors, before, `${s.name}: the two halves free what they kept`);
        // Released without its weight half: nothing leaks either.
        const kept2 = s.isLast ? undefined : s.forwardKeepingActivations(x);
        kept2?.output.dispose();
        const b2 = s.backwardInput(x, dy, { kept: kept2, targets, lossScale });
        b2.gradInput?.dispose();
        s.releaseDeferred(b2.deferred);
        assert.strictEqual(tf.memory().numTensors, before, `${s.name}: releaseDeferred frees the tape`);
        tf.dispose([y ?? [], dy ?? [], whole.gradInput ?? [], ...whole.paramGrads]);
      }
      stages.forEach((s) => s.dispose());
    });
  }

  it('a kept forward holds its activations until its backward or release, and then nothing leaks', () => {
    const c = gptCase(2);
    const stages = buildStages(c.spec, planPartition(c.spec, { stages: 2 }));
    const input = c.input();
    const before = tf.memory().numTensors;
    const kept = stages[0]!.forwardKeepingActivations(input);
    kept.output.dispose();
    assert.ok(tf.memory().numTensors > before, 'the tape keeps tensors alive');
    stages[0]!.releaseKept(kept);
    assert.strictEqual(tf.memory().numTensors, before, 'release frees them');
    const again = stages[0]!.forwardKeepingActivations(input);
    const dy = tf.onesLike(again.output);
    again.output.dispose();
    const r = stages[0]!.backward(input, dy, { kept: again });
    tf.dispose([dy, ...r.paramGrads]);
    assert.strictEqual(tf.memory().numTensors, before, 'backward frees them');
    const third = stages[0]!.forwardKeepingActivations(input);
    assert.throws(
      () => stages[0]!.backward(input, tf.onesLike(third.output), { kept: third, params: stages[0]!.params() }),
      /no params/,
    );
    assert.strictEqual(third.released, true, 'a refused kept backward still frees the tape');
    stages.forEach((s) => s.dispose());
  });

  it('backward at explicit (stashed) weights equals backward after loading those weights', () => {
    const c = mlpCase(1);
    const model = buildFullModel(c.spec);
    const [input, targets] = [c.input(), c.targets()];
    const stashed = model.params().map((p) => p.clone());
    model.params().forEach((p) => p.assign(p.mul(1.5)));
    const atStash = model.backward(input, null, { targets, lossScale: 1, params: stashed });
    model.params().forEach((p, i) => p.assign(stashed[i]!));
    const current = model.backward(input, null, { targets, lossScale: 1 });
    assert.strictEqual(atStash.loss, current.loss);
    current.paramGrads.forEach((g, i) =>
      assert.deepStrictEqual(Array.from(atStash.paramGrads[i]!.dataSync()), Array.from(g.dataSync())),
    );
    assert.throws(() => model.forward(input, stashed.slice(1)), /weight tensors/);
    model.dispose();
  });

  it('a stage rejects an input of the wrong dtype, quoting the shape', () => {
    const c = gptCase(2);
    const stages = buildStages(c.spec, planPartition(c.spec, { stages: 2 }));
    assert.throws(
      () => stages[1]!.forward(tf.zeros([2, 5, 8], 'int32')),
      /gpt\[h1, head\]: input dtype is int32, expected float32 \(shape \[2,5,8\]\)/,
    );
    assert.throws(() => stages[0]!.forward(tf.zeros([2, 9], 'int32')), /sequence of length 9, block size is only 5/);
    stages.forEach((s) => s.dispose());
  });

  it('backward leaks no tensors', () => {
    const c = gptCase(2);
    const stages = buildStages(c.spec, planPartition(c.spec, { stages: 2 }));
    const [input, targets] = [c.input(), c.targets()];
    const h = stages[0]!.forward(input);
    const before = tf.memory().numTensors;
    const b1 = stages[1]!.backward(h, null, { targets, lossScale: 1 });
    const b0 = stages[0]!.backward(input, b1.gradInput!);
    tf.dispose([b1.gradInput!, ...b1.paramGrads, ...b0.paramGrads]);
    assert.strictEqual(tf.memory().numTensors, before);
    stages.forEach((s) => s.dispose());
  });

  it('the MLP LM learns the synthetic corpus: 40 SGD steps lower the validation loss', () => {
    const corpus = loadCorpus();
    const spec = mlpLmSpec({
      vocabSize: corpus.vocabSize,
      window: 8,
      embedWidth: 8,
      width: 32,
      hidden: 64,
      layers: 2,
      seed: 1,
    });
    const model = buildFullModel(spec);
    const val = toTensors(corpus.windowBatch('val', 7, 0, 0, 256, 8));
    const valLoss = () => {
      const l = model.loss(val.inputs, val.targets);
      const v = l.dataSync()[0]!;
      l.dispose();
      return v;
    };
    const initial = valLoss();
    for (let it = 0; it < 40; it++) {
      const b = toTensors(corpus.windowBatch('train', 1, it, 0, 64, 8));
      const res = model.backward(b.inputs, null, { targets: b.targets, lossScale: 1 });
      model.params().forEach((p, i) => p.assign(p.sub(res.paramGrads[i]!.mul(1.0))));
      tf.dispose([b.inputs, b.targets, ...res.paramGrads]);
    }
    const trained = valLoss();
    assert.ok(trained < initial - 0.5, `validation loss went from ${initial.toFixed(3)} to ${trained.toFixed(3)}`);
    model.dispose();
  });
});
