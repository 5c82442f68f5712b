import { strict as assert } from 'node:assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { backwardFromTape } from '../models/kept-tape';
import { attachWeights, detachWeights } from '../models/kept-weights';
import { crossEntropy, linear } from '../models/layers';
import { mlpLmSpec } from '../models/mlp-lm';
import { SequentialStage } from '../models/sequential-stage';
import type { LayerSpec, ModelSpec } from '../models/stage-module';

const N = 6,
  D = 5,
  H = 7;
const block: LayerSpec = {
  name: 'b0',
  kind: 'block',
  flopsPerSample: 0,
  params: [
    { name: 'w1', shape: [D, H], init: { kind: 'normal', std: 0.5 } },
    { name: 'b1', shape: [H], init: { kind: 'normal', std: 0.5 } },
    { name: 'w2', shape: [H, D], init: { kind: 'normal', std: 0.5 } },
    { name: 'b2', shape: [D], init: { kind: 'normal', std: 0.5 } },
  ],
  apply([w1, b1, w2, b2], x) {
    return linear(tf.tanh(linear(x, w1!, b1!)), w2!, b2!); // (N, D)
  },
};
const spec: ModelSpec = {
  name: 'tanh-mlp',
  seed: 3,
  embed: block,
  blocks: [block],
  head: block,
  loss: crossEntropy,
  hiddenShape: (b) => [b, D],
};

const values = (ts: readonly tf.Tensor[]) => ts.map((t) => Array.from(t.dataSync()));
const maxDiff = (a: number[][], b: number[][]) =>
  Math.max(...a.flatMap((r, i) => r.map((v, j) => Math.abs(v - b[i]![j]!))));

describe('kept activations at other weights', () => {
  before(async () => {
    await loadBackend({ force: 'wasm' });
  });

  it("backpropagates at the backward's weights through the forward-time activations (dx = da·W1ᵀ at the current W1, dW2 = hᵀdy with the forward's h)", () => {
    const stage = new SequentialStage('tanh-mlp[b0]', spec, [block], false, false);
    const x = tf.randomNormal([N, D], 0, 1, 'float32', 1);
    const dy = tf.randomNormal([N, D], 0, 1, 'float32', 2);
    const shapes = block.params.map((p) => [...p.shape]);
    const wf = shapes.map((s, i) => tf.randomNormal(s, 0, 0.6, 'float32', 10 + i));
    const wc = shapes.map((s, i) => tf.randomNormal(s, 0, 0.6, 'float32', 20 + i));
    const [f1, fb1] = [wf[0]!, wf[1]!];
    const [c1, , c2] = [wc[0]!, wc[1]!, wc[2]!];
    // By hand: activations at the forward's weights, Jacobians at the current ones.
    const want = tf.tidy(() => {
      const h = tf.tanh(x.matMul(f1).add(fb1)); // (N, H), forward-time
      const dh = dy.matMul(c2.transpose()); // (N, H), current W2
      const da = dh.mul(tf.scalar(1).sub(h.square())); // tanh' at the forward-time pre-activation
      return [da.matMul(c1.transpose()), x.transpose().matMul(da), da.sum(0), h.transpose().matMul(dy), dy.sum(0)];
    });
    const kept = stage.forwardKeepingTapeAt(x, wf);
    const detached = detachWeights(kept, x, wf);
    assert.equal(detached.slots.length, 4, "the two matMuls' saved weights (the bias adds save none)");
    tf.dispose(wf); // the tape holds no copy of them any more
    attachWeights(detached, wc);
    const got = backwardFromTape(kept, [x, ...wf], dy);
    assert.ok(
      maxDiff(values(got), values(want)) < 1e-5,
      `kept-at-current differs from the hand-derived gradient by ${maxDiff(values(got), values(want))}`,
    );
    // Neither the gradient at the forward's weights nor a recompute at the current ones.
    const atCurrent = stage.backward(x, dy, { params: wc });
    assert.ok(maxDiff(values(got), values([atCurrent.gradInput!, ...atCurrent.paramGrads])) > 1e-3);
    tf.dispose([x, dy, ...wc, ...want, ...got, atCurrent.gradInput!, ...atCurrent.paramGrads, kept.output]);
    stage.dispose();
  });

  it("at unchanged weights equals recomputing the forward, through the MLP LM's norms, embedding and loss", () => {
    const mlp = mlpLmSpec({ vocabSize: 11, window: 4, embedWidth: 3, width: 8, hidden: 16, layers: 2, seed: 5 });
    const stage = new SequentialStage('mlp[all]', mlp, [mlp.embed, ...mlp.blocks, mlp.head], true, true);
    const ids = tf.tensor2d(
      [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10, 0, 1],
      ],
      undefined,
      'int32',
    );
    const targets = tf.tensor1d([3, 1, 4], 'int32');
    const w = stage.params().map((v) => v.clone());
    const w2 = w.map((t) => t.clone());
    const kept = stage.forwardKeepingTapeAt(ids, w, targets);
    const detached = detachWeights(kept, ids, w);
    assert.equal(detached.weightOnlyOps, 0, 'the MLP LM computes nothing from weights alone');
    tf.dispose(w);
    attachWeights(detached, w2);
    const dy = tf.scalar(1);
    const got = backwardFromTape(kept, w, dy);
    const ref = stage.backward(ids, null, { targets, lossScale: 1, params: w2 });
    assert.ok(maxDiff(values(got), values(ref.paramGrads)) < 1e-6);
    tf.dispose([ids, targets, dy, ...w2, ...got, ...ref.paramGrads, kept.output]);
    stage.dispose();
  });
});
