// A training run's stage boundary: the stage modules on either side (partitioned the same
// way in every process), the one tensor that crosses it (checked as it arrives), and the
// sizes of the messages that carry it. No tensors are computed here.

import { PipelineShape, virtualStage } from '../policies/task';
import { buildStage, planPartition } from '../models/partition';
import { StageModule } from '../models/stage-module';
import { TrainConfig, corpusFor, modelSpecFor } from '../models/train-config';
import { TensorPayload } from '../transport/envelope';
import { ArrivalRefusedError } from '../stage/compute';

/**
 * The stage modules of `stage`, one per chunk, partitioned the same way in every
 * process; balanced for backward passes that recompute their forward or not, and by
 * the stages' speeds when given (a speed-aware partition).
 */
export function stageModules(
  stage: number,
  shape: PipelineShape,
  train: TrainConfig,
  recomputedForward: boolean,
  weights?: readonly number[],
): StageModule[] {
  const spec = modelSpecFor(train, corpusFor(train).vocabSize);
  const plan = planPartition(spec, { stages: shape.stages, chunks: shape.chunks, recomputedForward, weights });
  return Array.from({ length: shape.chunks }, (_, c) => buildStage(spec, plan, virtualStage(stage, c, shape)));
}

/**
 * What crosses a stage boundary in a training run: one float32 tensor of the model's
 * hidden shape. The first virtual stage's input is only the signal that its microbatch
 * is available (it reads the tokens itself), so it carries no tensor.
 */
export function checkReceived(
  stage: number,
  kind: 'input' | 'grad',
  mb: number,
  chunk: number,
  tensors: readonly TensorPayload[],
  hidden: readonly number[],
): void {
  if (kind === 'input' && stage === 0 && chunk === 0) {
    if (tensors.length > 0)
      throw new ArrivalRefusedError(
        `stage 0: the data signal for microbatch ${mb} carries ${tensors.length} tensors, expected none`,
      );
    return;
  }
  const what = kind === 'input' ? 'activation' : 'gradient';
  if (tensors.length !== 1)
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} carries ${tensors.length} tensors, expected 1`,
    );
  const p = tensors[0];
  if (p.dtype !== 'float32')
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} has dtype ${p.dtype}, expected float32`,
    );
  if (p.shape.length !== hidden.length || p.shape.some((d, i) => d !== hidden[i]))
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} has shape [${p.shape.join(',')}], expected [${hidden.join(',')}]`,
    );
}

/** Envelope fields, CBOR framing, parameter names and report fields around the tensor data: generous. */
export const MESSAGE_ALLOWANCE = 64 * 1024;

/** A message carrying one float32 tensor of `shape`. */
export function tensorMessageBytes(shape: readonly number[]): number {
  return 4 * shape.reduce((a, b) => a * b, 1) + MESSAGE_ALLOWANCE;
}

/** The shape `checkReceived` expects for a training config. */
export function hiddenShapeFor(train: TrainConfig, vocabSize: number): number[] {
  return modelSpecFor(train, vocabSize).hiddenShape(train.microbatchSize, train.seq);
}
