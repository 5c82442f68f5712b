// The pre-LayerNorm GELU MLP around a residual, x + W2·gelu(W1·LN(x) + b1) + b2: the MLP
// half of a GPT block (gpt.ts) and the whole of an MLP LM's block (mlp-lm.ts).

import * as tf from '@tensorflow/tfjs';
import { gelu, layerNorm, linear } from './layers';
import type { ParamSpec } from './stage-module';
import type { InitKind } from './seeded-init';

const ones: InitKind = { kind: 'constant', value: 1 };
const zeros: InitKind = { kind: 'constant', value: 0 };

/**
 * Its parameters, in the order residualMlp takes them: the LayerNorm's gain and bias
 * (`${ln}.g`, `${ln}.b`), then `${at}w1` (width × hidden), `${at}b1`, `${at}w2` (hidden ×
 * width, from `residual`) and `${at}b2`.
 */
export function residualMlpParams(
  ln: string,
  at: string,
  width: number,
  hidden: number,
  init: { normal: InitKind; residual: InitKind },
): ParamSpec[] {
  return [
    { name: `${ln}.g`, shape: [width], init: ones },
    { name: `${ln}.b`, shape: [width], init: zeros },
    { name: `${at}w1`, shape: [width, hidden], init: init.normal },
    { name: `${at}b1`, shape: [hidden], init: zeros },
    { name: `${at}w2`, shape: [hidden, width], init: init.residual },
    { name: `${at}b2`, shape: [width], init: zeros },
  ];
}

export function residualMlp(
  x: tf.Tensor,
  g: tf.Tensor,
  b: tf.Tensor,
  w1: tf.Tensor,
  b1: tf.Tensor,
  w2: tf.Tensor,
  b2: tf.Tensor,
): tf.Tensor {
  return x.add(linear(gelu(linear(layerNorm(x, g, b), w1, b1)), w2, b2));
}
