import { TRAIN_DEFAULTS } from '../job/defaults';
import { resolveConfig } from '../job/config';
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

/** The job the attack and fencing tests train over NATS: smallMlpTrain on 2 stages, 4 microbatches, 3 iterations of bf. */
export function smallMlpJob(job: string, checkpoint: string, every: number) {
  return resolveConfig({
    job,
    stages: 2,
    microbatches: 4,
    iterations: 3,
    policy: 'bf',
    profile: 'train',
    stallTimeoutMs: 120000,
    train: smallMlpTrain(checkpoint, every),
  });
}
