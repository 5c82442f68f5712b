// What a training job computes: the model, its size, the data and the optimizer
// settings. Plain data, so it travels to node agents inside the job config; every
// process derives the same model spec and the same batches from it.

import { Batch, Corpus, loadCorpus, syntheticCorpus } from './data';
import { ModelConfigError, gptSpec } from './gpt';
import { mlpLmSpec } from './mlp-lm';
import { ModelSpec } from './stage-module';
import { SHAPE_LIMITS } from '../policies/task';
import { planPartition } from './partition';

export interface TrainConfig {
  /** gpt: char-level GPT; mlp: residual MLP language model. */
  model: 'gpt' | 'mlp';
  /** Text file to train on; null: the runtime's own synthetic corpus. */
  data: string | null;
  /** Sequences (gpt) or windows (mlp) per microbatch. */
  microbatchSize: number;
  /** Context length (gpt) or window of previous characters (mlp). */
  seq: number;
  /** Transformer blocks (gpt) or residual MLP blocks (mlp). */
  layers: number;
  /** Residual width. */
  width: number;
  /** Attention heads (gpt). */
  heads: number;
  /** Peak learning rate, warmup steps, then cosine to 0.1x over `iterations`. */
  lr: number;
  warmup: number;
  weightDecay: number;
  /** Seed of the model initialisation and of the batches. */
  seed: number;
  /** Force a tfjs backend (tfjs-node-gpu, tfjs-node, wasm, cpu); null: the first that loads. */
  backend: string | null;
  /** Directory to save a checkpoint to after every `checkpointEvery` iterations (and at the end). */
  checkpoint: string | null;
  checkpointEvery: number;
  /** Iteration to resume from (read from the checkpoint); 0 = fresh start. */
  startIteration: number;
  /** Iterations of the whole run, resumed parts included (the learning-rate schedule's length). */
  totalIterations: number;
  /** Validation microbatches evaluated at the end. */
  valBatches: number;
}

const corpora = new Map<string, Corpus>();

/** The corpus of a config, loaded once per process. */
export function corpusFor(t: TrainConfig): Corpus {
  const key = t.data ?? `synthetic:${t.seed}`;
  let c = corpora.get(key);
  if (!c) {
    c = t.data ? loadCorpus(t.data) : syntheticCorpus(t.seed);
    corpora.set(key, c);
  }
  return c;
}

export function modelSpecFor(t: TrainConfig, vocabSize: number): ModelSpec {
  if (t.model === 'gpt')
    return gptSpec({ vocabSize, seqLen: t.seq, layers: t.layers, width: t.width, heads: t.heads, seed: t.seed });
  return mlpLmSpec({ vocabSize, window: t.seq, layers: t.layers, width: t.width, hidden: 4 * t.width, seed: t.seed });
}

export function batchFor(t: TrainConfig, corpus: Corpus, split: 'train' | 'val', iteration: number, mb: number): Batch {
  return t.model === 'gpt'
    ? corpus.batch(split, t.seed, iteration, mb, t.microbatchSize, t.seq)
    : corpus.windowBatch(split, t.seed, iteration, mb, t.microbatchSize, t.seq);
}

/** Tokens (predicted characters) in one microbatch. */
/** Bounds refused up front: beyond them tfjs's arrays fail with a bare RangeError or memory runs out. */
export const MAX_MODEL_PARAMS = 2 ** 28;
export const MAX_MICROBATCH_VALUES = 2 ** 26;
/** Validation microbatches evaluated at the end, at most: as many as an iteration may have.
 * They run after the training, one full-model forward each, so a typo beyond this would
 * keep a finished run from reporting for days. */
export const MAX_VAL_BATCHES = SHAPE_LIMITS.perStage;

/**
 * Refuses a model or microbatch too large to train here, naming the flags: at most
 * MAX_MODEL_PARAMS parameters (1 GiB of float32, before two optimizer moments) and at
 * most MAX_MICROBATCH_VALUES floats in the tensor between two stages (four times that
 * in a GPT microbatch's attention scores).
 */
export function checkTrainSize(t: TrainConfig, spec: ModelSpec): void {
  let params = 0;
  for (const layer of [spec.embed, ...spec.blocks, spec.head])
    for (const p of layer.params) params += p.shape.reduce((a, b) => a * b, 1);
  if (params > MAX_MODEL_PARAMS)
    throw new ModelConfigError(
      `${t.model} config: ${params} parameters (--layers ${t.layers}, --width ${t.width}), over the limit of ${MAX_MODEL_PARAMS}`,
    );
  const values = spec.hiddenShape(t.microbatchSize, t.seq).reduce((a, b) => a * b, 1);
  if (values > MAX_MICROBATCH_VALUES)
    throw new ModelConfigError(
      `${t.model} config: a microbatch's activations are ${values} values (--microbatch-size ${t.microbatchSize}, --seq ${t.seq}, --width ${t.width}), over the limit of ${MAX_MICROBATCH_VALUES}`,
    );
  const scores = t.model === 'gpt' ? t.microbatchSize * t.heads * t.seq * t.seq : 0;
  if (scores > 4 * MAX_MICROBATCH_VALUES)
    throw new ModelConfigError(
      `gpt config: a microbatch's attention scores are ${scores} values (--microbatch-size ${t.microbatchSize} x --heads ${t.heads} x --seq ${t.seq} squared), over the limit of ${4 * MAX_MICROBATCH_VALUES}`,
    );
}

export function tokensPerMicrobatch(t: TrainConfig): number {
  return t.model === 'gpt' ? t.microbatchSize * t.seq : t.microbatchSize;
}

/** Each physical stage's forward FLOPs per sample under the uniform partition: its work at equal speeds. */
export function uniformStageFlops(t: TrainConfig, stages: number, chunks: number): number[] {
  const plan = planPartition(modelSpecFor(t, corpusFor(t).vocabSize), { stages, chunks });
  const work = new Array<number>(stages).fill(0);
  for (const v of plan.virtual) work[v.stage] += v.flopsPerSample;
  return work;
}
