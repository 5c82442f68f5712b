import { TRAIN_DEFAULTS } from '../job/defaults';
import { TrainConfig } from '../models/train-config';

/** A tiny model for the tensor-parallel tests: 2 blocks of width 16, 4 heads, short sequences, `iterations` long. */
export function tinyTrainConfig(
  model: 'gpt' | 'mlp',
  iterations: number,
  extra: Partial<TrainConfig> = {},
): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model,
    microbatchSize: 2,
    seq: 8,
    layers: 2,
    width: 16,
    heads: 4,
    lr: 1e-2,
    warmup: 1,
    totalIterations: iterations,
    valBatches: 1,
    ...extra,
  };
}

/** The small MLP LM the attack and fencing tests train (4 blocks of width 16), checkpointing into `checkpoint` every `every` iterations (0: at the end). */
export function smallMlpTrain(checkpoint: string, every: number): TrainConfig {
  return {
    ...TRAIN_DEFAULTS,
    model: 'mlp',
    microbatchSize: 4,
    seq: 8,
    layers: 4,
    width: 16,
    lr: 1e-2,
    warmup: 1,
    totalIterations: 3,
    valBatches: 1,
    checkpoint,
    checkpointEvery: every,
  };
}
