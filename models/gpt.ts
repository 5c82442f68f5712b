// Character-level GPT (nanoGPT's architecture at small scale): token + learned position
// embeddings, L pre-LayerNorm blocks (causal self-attention with H heads, then a 4x MLP
// with GELU), a final LayerNorm and an untied linear LM head. Described as layer specs so
// the partitioner can cut it between blocks.
//
// Not modelled: dropout, weight tying, bias-free variants, flash attention.

import * as tf from '@tensorflow/tfjs';
import { causalSelfAttention, crossEntropy, layerNorm, linear } from './layers';
import { residualMlp, residualMlpParams } from './residual-mlp';
import type { LayerSpec, ModelSpec, ParamSpec } from './stage-module';
import type { InitKind } from './seeded-init';
import { InputError } from '../base/errors';

export interface GptConfig {
  /** Characters in the vocabulary (65 for tinyshakespeare). */
  readonly vocabSize: number;
  /** Context length T; inputs may be shorter, never longer. */
  readonly seqLen: number;
  /** Transformer blocks. */
  readonly layers: number;
  /** Embedding width C; must be divisible by heads. */
  readonly width: number;
  readonly heads: number;
  /** Seed of the deterministic initialisation. */
  readonly seed: number;
  /** Std of weight init (GPT-2's 0.02); residual projections get std / sqrt(2 * layers). */
  readonly initStd: number;
}

export const GPT_DEFAULTS: GptConfig = {
  vocabSize: 65,
  seqLen: 64,
  layers: 2,
  width: 128,
  heads: 4,
  seed: 1,
  initStd: 0.02,
};

export class ModelConfigError extends InputError {
  override name = 'ModelConfigError';
}

function checkConfig(c: GptConfig): void {
  for (const key of ['vocabSize', 'seqLen', 'layers', 'width', 'heads'] as const) {
    if (!Number.isInteger(c[key]) || c[key] < 1)
      throw new ModelConfigError(`gpt config: ${key} must be a positive integer, got ${c[key]}`);
  }
  if (c.width % c.heads !== 0)
    throw new ModelConfigError(`gpt config: width ${c.width} is not divisible by heads ${c.heads}`);
}

const ones: InitKind = { kind: 'constant', value: 1 };
const zeros: InitKind = { kind: 'constant', value: 0 };

export function gptSpec(partial: Partial<GptConfig> = {}): ModelSpec {
  const c: GptConfig = { ...GPT_DEFAULTS, ...partial };
  checkConfig(c);
  const blocks: LayerSpec[] = [];
  for (let i = 0; i < c.layers; i++) blocks.push(gptBlock(c, i));
  return {
    name: 'gpt',
    seed: c.seed,
    embed: gptEmbed(c),
    blocks,
    head: gptHead(c),
    loss: crossEntropy,
    hiddenShape: (batch, seq) => [batch, seq, c.width],
  };
}

const normalInit = (c: GptConfig): InitKind => ({ kind: 'normal', std: c.initStd });

/** Token and learned position embeddings. */
function gptEmbed(c: GptConfig): LayerSpec {
  const C = c.width;
  const V = c.vocabSize;
  const T = c.seqLen;
  const normal = normalInit(c);
  return {
    name: 'embed',
    kind: 'embed',
    params: [
      { name: 'gpt.wte', shape: [V, C], init: normal },
      { name: 'gpt.wpe', shape: [T, C], init: normal },
    ],
    flopsPerSample: T * C,
    apply([wte, wpe], ids) {
      const [, t] = ids.shape as [number, number];
      if (t > T) throw new RangeError(`gpt: cannot forward sequence of length ${t}, block size is only ${T}`);
      const tok = tf.gather(wte!, ids); // (B, t, C)
      const pos = wpe!.slice([0, 0], [t, C]); // (t, C)
      return tok.add(pos);
    },
  };
}

/** Block i: pre-LayerNorm causal self-attention, then the 4x GELU MLP, each around a residual. */
function gptBlock(c: GptConfig, i: number): LayerSpec {
  const C = c.width;
  const T = c.seqLen;
  const normal = normalInit(c);
  const residual: InitKind = { kind: 'normal', std: c.initStd / Math.sqrt(2 * c.layers) };
  const p = (s: string) => `gpt.h${i}.${s}`;
  const params: ParamSpec[] = [
    { name: p('ln1.g'), shape: [C], init: ones },
    { name: p('ln1.b'), shape: [C], init: zeros },
    { name: p('attn.wq'), shape: [C, C], init: normal },
    { name: p('attn.bq'), shape: [C], init: zeros },
    { name: p('attn.wk'), shape: [C, C], init: normal },
    { name: p('attn.bk'), shape: [C], init: zeros },
    { name: p('attn.wv'), shape: [C, C], init: normal },
    { name: p('attn.bv'), shape: [C], init: zeros },
    { name: p('attn.wo'), shape: [C, C], init: residual },
    { name: p('attn.bo'), shape: [C], init: zeros },
    ...residualMlpParams(p('ln2'), p('mlp.'), C, 4 * C, { normal, residual }),
  ];
  return {
    name: `h${i}`,
    kind: 'block',
    params,
    // Per token: q, k, v 6C², out-proj 2C², MLP 16C², attention scores and mixing 4TC.
    flopsPerSample: T * (24 * C * C + 4 * T * C),
    apply([g1, b1, wq, bq, wk, bk, wv, bv, wo, bo, g2, b2, w1, bb1, w2, bb2], x) {
      const attn = { wq: wq!, bq: bq!, wk: wk!, bk: bk!, wv: wv!, bv: bv!, wo: wo!, bo: bo! };
      const a = x.add(causalSelfAttention(layerNorm(x, g1!, b1!), c.heads, attn)); // (B, T, C)
      return residualMlp(a, g2!, b2!, w1!, bb1!, w2!, bb2!); // (B, T, C)
    },
  };
}

/** Final LayerNorm and the untied LM head. */
function gptHead(c: GptConfig): LayerSpec {
  const C = c.width;
  const V = c.vocabSize;
  const T = c.seqLen;
  return {
    name: 'head',
    kind: 'head',
    params: [
      { name: 'gpt.lnf.g', shape: [C], init: ones },
      { name: 'gpt.lnf.b', shape: [C], init: zeros },
      { name: 'gpt.lm_head', shape: [C, V], init: normalInit(c) },
    ],
    flopsPerSample: T * 2 * C * V,
    apply([g, b, w], x) {
      return linear(layerNorm(x, g!, b!), w!); // (B, T, V)
    },
  };
}
