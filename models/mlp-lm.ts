// Residual MLP language model: the W previous characters are embedded, the embeddings
// concatenated and projected to width D, then L residual blocks (LayerNorm → Linear →
// GELU → Linear, added back), a final LayerNorm and a softmax head predict the next
// character. Input (B, W) int32 windows, targets (B) int32.
//
// Not modelled: attention or any context beyond the window.

import * as tf from '@tensorflow/tfjs';
import { crossEntropy, layerNorm, linear } from './layers';
import { residualMlp, residualMlpParams } from './residual-mlp';
import { ModelConfigError } from './gpt';
import type { LayerSpec, ModelSpec } from './stage-module';
import type { InitKind } from './seeded-init';

export interface MlpLmConfig {
  /** Characters in the vocabulary. */
  readonly vocabSize: number;
  /** Previous characters seen, W. */
  readonly window: number;
  /** Per-character embedding width E. */
  readonly embedWidth: number;
  /** Residual stream width D. */
  readonly width: number;
  /** Hidden width of each block's MLP (4D is conventional). */
  readonly hidden: number;
  /** Residual blocks L. */
  readonly layers: number;
  readonly seed: number;
  /** Std of weight init; the blocks' output projections get std / sqrt(2 * layers). */
  readonly initStd: number;
}

export const MLP_LM_DEFAULTS: MlpLmConfig = {
  vocabSize: 65,
  window: 16,
  embedWidth: 16,
  width: 256,
  hidden: 1024,
  layers: 4,
  seed: 1,
  initStd: 0.02,
};

export function mlpLmSpec(partial: Partial<MlpLmConfig> = {}): ModelSpec {
  const c: MlpLmConfig = { ...MLP_LM_DEFAULTS, ...partial };
  for (const key of ['vocabSize', 'window', 'embedWidth', 'width', 'hidden', 'layers'] as const) {
    if (!Number.isInteger(c[key]) || c[key] < 1)
      throw new ModelConfigError(`mlp-lm config: ${key} must be a positive integer, got ${c[key]}`);
  }
  const { vocabSize: V, window: W, embedWidth: E, width: D, hidden: H } = c;
  const normal: InitKind = { kind: 'normal', std: c.initStd };
  const residual: InitKind = { kind: 'normal', std: c.initStd / Math.sqrt(2 * c.layers) };
  const ones: InitKind = { kind: 'constant', value: 1 };
  const zeros: InitKind = { kind: 'constant', value: 0 };

  const embed: LayerSpec = {
    name: 'embed',
    kind: 'embed',
    params: [
      { name: 'mlp.wte', shape: [V, E], init: normal },
      { name: 'mlp.in.w', shape: [W * E, D], init: normal },
      { name: 'mlp.in.b', shape: [D], init: zeros },
    ],
    flopsPerSample: 2 * W * E * D,
    apply([wte, w, b], ids) {
      const [B, w0] = ids.shape as [number, number];
      if (w0 !== W) throw new RangeError(`mlp-lm: input window has ${w0} characters, the model takes ${W}`);
      const e = tf.gather(wte!, ids).reshape([B, W * E]); // (B, W*E)
      return linear(e, w!, b!); // (B, D)
    },
  };

  const blocks: LayerSpec[] = [];
  for (let i = 0; i < c.layers; i++) {
    const p = (s: string) => `mlp.b${i}.${s}`;
    blocks.push({
      name: `b${i}`,
      kind: 'block',
      params: residualMlpParams(p('ln'), p(''), D, H, { normal, residual }),
      flopsPerSample: 4 * D * H,
      apply([g, b, w1, b1, w2, b2], x) {
        return residualMlp(x, g!, b!, w1!, b1!, w2!, b2!); // (B, D)
      },
    });
  }

  const head: LayerSpec = {
    name: 'head',
    kind: 'head',
    params: [
      { name: 'mlp.lnf.g', shape: [D], init: ones },
      { name: 'mlp.lnf.b', shape: [D], init: zeros },
      { name: 'mlp.head.w', shape: [D, V], init: normal },
      { name: 'mlp.head.b', shape: [V], init: zeros },
    ],
    flopsPerSample: 2 * D * V,
    apply([g, b, w, bias], x) {
      return linear(layerNorm(x, g!, b!), w!, bias!); // (B, V)
    },
  };

  return { name: 'mlp', seed: c.seed, embed, blocks, head, loss: crossEntropy, hiddenShape: (batch) => [batch, D] };
}
