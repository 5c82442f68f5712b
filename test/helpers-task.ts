import { PipelineShape } from '../policies/task';

/** A pipeline shape of `stages` × `microbatches`, `chunks` per stage, backward split or not. */
export const shape = (stages: number, microbatches: number, chunks = 1, splitBackward = false): PipelineShape => ({
  stages,
  chunks,
  microbatches,
  splitBackward,
});
