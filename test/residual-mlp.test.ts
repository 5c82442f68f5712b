import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { gelu, layerNorm, linear } from '../models/layers';
import { residualMlp, residualMlpParams } from '../models/residual-mlp';
import type { InitKind } from '../models/seeded-init';

describe('the residual MLP', () => {
  before(async () => {
    await loadBackend({ force: 'cpu' });
  });

  it('names its parameters under the LayerNorm name and the linears’ prefix, in the order it takes them', () => {
    const normal: InitKind = { kind: 'normal', std: 0.02 };
    const residual: InitKind = { kind: 'normal', std: 0.01 };
    const ps = residualMlpParams('m.b0.ln', 'm.b0.', 4, 16, { normal, residual });
    assert.deepEqual(
      ps.map((p) => [p.name, p.shape, p.init]),
      [
        ['m.b0.ln.g', [4], { kind: 'constant', value: 1 }],
        ['m.b0.ln.b', [4], { kind: 'constant', value: 0 }],
        ['m.b0.w1', [4, 16], normal],
        ['m.b0.b1', [16], { kind: 'constant', value: 0 }],
        ['m.b0.w2', [16, 4], residual],
        ['m.b0.b2', [4], { kind: 'constant', value: 0 }],
      ],
    );
  });

  it('adds to its input the MLP of the input’s LayerNorm', () => {
    const rand = (seed: number, shape: number[]) => tf.randomNormal(shape, 0, 1, 'float32', seed);
    const [x, g, b, w1, b1, w2, b2] = [
      rand(1, [2, 3]),
      rand(2, [3]),
      rand(3, [3]),
      rand(4, [3, 5]),
      rand(5, [5]),
      rand(6, [5, 3]),
      rand(7, [3]),
    ];
    const expected = x.add(linear(gelu(linear(layerNorm(x, g, b), w1, b1)), w2, b2));
    assert.deepEqual(Array.from(residualMlp(x, g, b, w1, b1, w2, b2).dataSync()), Array.from(expected.dataSync()));
    const zero = tf.zeros([5, 3]);
    assert.deepEqual(
      Array.from(residualMlp(x, g, b, w1, b1, zero, tf.zeros([3])).dataSync()),
      Array.from(x.dataSync()),
      'with W2 and b2 zero it is the identity',
    );
  });
});
