// A stage's chunks as synchronous training keeps them (module, parameter names, AdamW,
// the microbatch-ordered gradient sum): the flush's optimizer step of one chunk, and the
// snapshot a checkpoint holds and its restore; and the training compute's error (TrainingComputeError).
// No forward or backward runs here.

import { AdamW } from '../policies/optim/adamw';
import { OptimizerState } from '../policies/optim/optimizer';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { StageModule } from '../models/stage-module';
import { assignValues, readFloat32 } from '../models/tensor-io';
import { stepVariables } from '../models/adamw-step';

export class TrainingComputeError extends Error {
  override name = 'TrainingComputeError';
}

/** Parameters and optimizer moments of one stage, as they go into a checkpoint. */
export interface StageSnapshot {
  params: Record<string, Float32Array>;
  optimizer: OptimizerState[];
}

/** What the optimizer step and snapshots need of a chunk's module (a stage module, or a TP rank's share). */
export type ParamHolder = Pick<StageModule, 'params'>;

export interface ChunkState<M extends ParamHolder = StageModule> {
  module: M;
  names: string[];
  optimizer: AdamW;
  sum: OrderedSum | null;
}

/** One AdamW step of chunk `c` with its microbatch-ordered gradient sum, written into its module's variables. */
export function stepChunk(c: ChunkState<ParamHolder>, sum: OrderedSum, lr: number): void {
  stepVariables(c.module.params(), c.names, c.optimizer, sum, lr);
}

export function snapshotChunks(chunks: readonly ChunkState<ParamHolder>[]): StageSnapshot {
  const params: Record<string, Float32Array> = {};
  for (const c of chunks) c.module.params().forEach((v, i) => (params[c.names[i]] = readFloat32(v)));
  return { params, optimizer: chunks.map((c) => c.optimizer.state()) };
}

/** Load a checkpoint's parameters and optimizer state into stage `stage`'s chunks, refusing one of another model. */
export function restoreChunks(stage: number, chunks: readonly ChunkState<ParamHolder>[], s: StageSnapshot): void {
  chunks.forEach((c, ci) => {
    c.module.params().forEach((v, i) => {
      const p = s.params[c.names[i]];
      if (!p)
        throw new TrainingComputeError(`stage ${stage}: checkpoint lacks parameter ${c.names[i]} (${v.size} values)`);
      if (p.length !== v.size)
        throw new TrainingComputeError(
          `stage ${stage}: checkpoint parameter ${c.names[i]} has ${p.length} values, this model's has ${v.size} (another corpus vocabulary or model size?)`,
        );
      assignValues(v, Float32Array.from(p));
    });
    const st = s.optimizer[ci];
    if (!st) throw new TrainingComputeError(`stage ${stage}: checkpoint lacks the optimizer state of chunk ${ci}`);
    c.optimizer.load(st);
  });
}
