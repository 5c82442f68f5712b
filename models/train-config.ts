// What a training job computes: the model, its size, the data and the optimizer
// settings. Plain data, so it travels to node agents inside the job config; every
// process derives the same model spec and the same batches from it.

import { Batch, Corpus, loadCorpus, syntheticCorpus } from './data';
import { gptSpec } from './gpt';
import { mlpLmSpec } from './mlp-lm';
import { ModelSpec } from './stage-module';

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

export const TRAIN_DEFAULTS: TrainConfig = {
  model: 'gpt',
  data: null,
  microbatchSize: 8,
  seq: 64,
  layers: 4,
  width: 64,
  heads: 4,
  lr: 3e-3,
  warmup: 10,
  weightDecay: 0.01,
  seed: 1,
  backend: null,
  checkpoint: null,
  checkpointEvery: 0,
  startIteration: 0,
  totalIterations: 1,
  valBatches: 8,
};

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
  if (t.model === 'gpt') return gptSpec({ vocabSize, seqLen: t.seq, layers: t.layers, width: t.width, heads: t.heads, seed: t.seed });
  return mlpLmSpec({ vocabSize, window: t.seq, layers: t.layers, width: t.width, hidden: 4 * t.width, seed: t.seed });
}

export function batchFor(t: TrainConfig, corpus: Corpus, split: 'train' | 'val', iteration: number, mb: number): Batch {
  return t.model === 'gpt'
    ? corpus.batch(split, t.seed, iteration, mb, t.microbatchSize, t.seq)
    : corpus.windowBatch(split, t.seed, iteration, mb, t.microbatchSize, t.seq);
}

/** Tokens (predicted characters) in one microbatch. */
export function tokensPerMicrobatch(t: TrainConfig): number {
  return t.model === 'gpt' ? t.microbatchSize * t.seq : t.microbatchSize;
}
