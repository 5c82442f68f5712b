// The Megatron split of Baton's models for one tensor-parallel rank of T. A model becomes a
// chain of steps: `local` steps every rank runs whole (embeddings, the head; replicated
// weights), and `parallel` steps, each a residual sublayer t → t + (Σ_ranks core(norm(t)) + bias)
// whose norm and bias are replicated and whose core is the rank's share: a column-parallel
// first matrix (QKV of its heads, or fc1's columns) and a row-parallel second (the output
// projection's or fc2's rows), so the core's output is a partial sum that one all-reduce
// completes. The parameters keep the TP = 1 names, shapes (before slicing) and initialisers.
//
// Not modelled: sequence parallelism, a vocabulary-parallel embedding or head.

import * as tf from '@tensorflow/tfjs';
import { attentionHeads, gelu, layerNorm, linear } from '../layers';
import { gptSpec, GptConfig, GPT_DEFAULTS } from '../gpt';
import { mlpLmSpec, MlpLmConfig, MLP_LM_DEFAULTS } from '../mlp-lm';
import type { LayerSpec, ModelSpec } from '../stage-module';
import { ShardedParam, gatherShards } from './sharded-param';
import type { TrainConfig } from '../train-config';
import { checkTensorParallel } from './tp-shape';

export interface LocalStep {
  readonly kind: 'local';
  readonly name: string;
  readonly params: readonly ShardedParam[];
  apply(params: readonly tf.Tensor[], x: tf.Tensor): tf.Tensor;
}

export interface ParallelStep {
  readonly kind: 'parallel';
  readonly name: string;
  /** Replicated: the LayerNorm before the column-parallel matrix. */
  readonly norm: readonly ShardedParam[];
  /** This rank's slices. */
  readonly core: readonly ShardedParam[];
  /** Replicated: the row-parallel matrix's bias, added once after the all-reduce. */
  readonly bias: ShardedParam;
  normApply(params: readonly tf.Tensor[], x: tf.Tensor): tf.Tensor;
  /** The rank's partial sum of the sublayer's output (no bias). */
  coreApply(params: readonly tf.Tensor[], h: tf.Tensor): tf.Tensor;
}

export type TpStep = LocalStep | ParallelStep;

/** A model as TP steps, per layer of its ModelSpec (so a partition plan of the spec cuts it the same way). */
export interface TpModel {
  readonly spec: ModelSpec;
  readonly ranks: number;
  readonly embed: readonly TpStep[];
  readonly blocks: readonly (readonly TpStep[])[];
  readonly head: readonly TpStep[];
}

function localStep(layer: LayerSpec): LocalStep {
  return {
    kind: 'local',
    name: layer.name,
    params: layer.params.map((p) => ({ name: p.name, fullShape: p.shape, init: p.init })),
    apply: (params, x) => layer.apply(params, x),
  };
}

/** The layer's parameter named `<prefix><suffix>`, sliced along `axis` (or replicated). */
function paramOf(layer: LayerSpec, prefix: string, axis?: 0 | 1): (suffix: string) => ShardedParam {
  return (suffix: string): ShardedParam => {
    const p = layer.params.find((q) => q.name === prefix + suffix);
    if (!p) throw new Error(`tp: ${layer.name} has no parameter ${prefix + suffix}`);
    return axis === undefined
      ? { name: p.name, fullShape: p.shape, init: p.init }
      : { name: p.name, fullShape: p.shape, init: p.init, axis };
  };
}

const norm = ([g, b]: readonly tf.Tensor[], x: tf.Tensor) => layerNorm(x, g!, b!);

/** fc1 (column-parallel) → GELU → fc2 (row-parallel, no bias): the rank's partial MLP output. */
const mlpCore = ([w1, b1, w2]: readonly tf.Tensor[], h: tf.Tensor) => linear(gelu(linear(h, w1!, b1!)), w2!);

function gptBlockSteps(layer: LayerSpec, i: number, heads: number, width: number, ranks: number): ParallelStep[] {
  const rep = paramOf(layer, `gpt.h${i}.`);
  const col = paramOf(layer, `gpt.h${i}.`, 1);
  const row = paramOf(layer, `gpt.h${i}.`, 0);
  const localHeads = heads / ranks;
  const headDim = width / heads;
  return [
    {
      kind: 'parallel',
      name: `h${i}.attn`,
      norm: [rep('ln1.g'), rep('ln1.b')],
      // wq, bq, wk, bk, wv, bv: this rank's heads' columns; wo: their rows.
      core: [
        ...['attn.wq', 'attn.bq', 'attn.wk', 'attn.bk', 'attn.wv', 'attn.bv'].map((n, k) => (k % 2 ? row : col)(n)),
        row('attn.wo'),
      ],
      bias: rep('attn.bo'),
      normApply: norm,
      coreApply([wq, bq, wk, bk, wv, bv, wo], h) {
        const w = { wq: wq!, bq: bq!, wk: wk!, bk: bk!, wv: wv!, bv: bv! };
        return linear(attentionHeads(h, localHeads, headDim, w), wo!); // (B, T, C), partial
      },
    },
    {
      kind: 'parallel',
      name: `h${i}.mlp`,
      norm: [rep('ln2.g'), rep('ln2.b')],
      core: [col('mlp.w1'), row('mlp.b1'), row('mlp.w2')],
      bias: rep('mlp.b2'),
      normApply: norm,
      coreApply: mlpCore,
    },
  ];
}

/** The char-GPT split across `ranks` ranks (heads must divide evenly). */
export function gptTpModel(partial: Partial<GptConfig>, ranks: number): TpModel {
  const c: GptConfig = { ...GPT_DEFAULTS, ...partial };
  checkTensorParallel({ model: 'gpt', heads: c.heads, width: c.width, hidden: 4 * c.width }, ranks);
  const spec = gptSpec(c);
  return {
    spec,
    ranks,
    embed: [localStep(spec.embed)],
    blocks: spec.blocks.map((b, i) => gptBlockSteps(b, i, c.heads, c.width, ranks)),
    head: [localStep(spec.head)],
  };
}

/** The residual MLP LM split across `ranks` ranks (each block's hidden width must divide evenly). */
export function mlpTpModel(partial: Partial<MlpLmConfig>, ranks: number): TpModel {
  const c: MlpLmConfig = { ...MLP_LM_DEFAULTS, ...partial };
  checkTensorParallel({ model: 'mlp', heads: 1, width: c.width, hidden: c.hidden }, ranks);
  const spec = mlpLmSpec(c);
  const block = (layer: LayerSpec, i: number): ParallelStep => {
    const [rep, col, row] = [undefined, 1 as const, 0 as const].map((a) => paramOf(layer, `mlp.b${i}.`, a));
    return {
      kind: 'parallel',
      name: `b${i}`,
      norm: [rep('ln.g'), rep('ln.b')],
      core: [col!('w1'), row!('b1'), row!('w2')],
      bias: rep('b2'),
      normApply: norm,
      coreApply: mlpCore,
    };
  };
  return {
    spec,
    ranks,
    embed: [localStep(spec.embed)],
    blocks: spec.blocks.map((b, i) => [block(b, i)]),
    head: [localStep(spec.head)],
  };
}

/** Parameters of a step in the rank's fixed order: norm, core, bias (a block's TP = 1 order). */
export function stepParams(s: TpStep): readonly ShardedParam[] {
  return s.kind === 'local' ? s.params : [...s.norm, ...s.core, s.bias];
}

/** The TP model of a training config (the same sizes as modelSpecFor). */
export function tpModelFor(t: TrainConfig, vocabSize: number, ranks: number): TpModel {
  if (t.model === 'gpt')
    return gptTpModel(
      { vocabSize, seqLen: t.seq, layers: t.layers, width: t.width, heads: t.heads, seed: t.seed },
      ranks,
    );
  return mlpTpModel(
    { vocabSize, window: t.seq, layers: t.layers, width: t.width, hidden: 4 * t.width, seed: t.seed },
    ranks,
  );
}

/** Every parameter of the model, by name, with how it is sliced. */
export function shardIndex(model: TpModel): Map<string, ShardedParam> {
  const steps = [...model.embed, ...model.blocks.flat(), ...model.head];
  return new Map(steps.flatMap((s) => stepParams(s).map((p) => [p.name, p] as const)));
}

/**
 * The full parameters from each rank's (index = rank), as TP = 1 holds them: slices joined
 * in rank order, replicated parameters taken from rank 0.
 */
export function gatherRanks(
  model: TpModel,
  perRank: readonly ReadonlyMap<string, Float32Array>[],
): Map<string, Float32Array> {
  if (perRank.length !== model.ranks)
    throw new RangeError(`gather: ${perRank.length} ranks' parameters for a model split ${model.ranks} ways`);
  const index = shardIndex(model);
  const out = new Map<string, Float32Array>();
  for (const name of perRank[0]!.keys()) {
    const p = index.get(name);
    if (!p) throw new RangeError(`gather: ${name} is not a parameter of ${model.spec.name}`);
    out.set(
      name,
      gatherShards(
        p,
        perRank.map((r) => {
          const v = r.get(name);
          if (!v) throw new RangeError(`gather: a rank lacks ${name}`);
          return v;
        }),
      ),
    );
  }
  return out;
}
