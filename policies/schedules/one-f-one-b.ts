// 1F1B (PipeDream-flush, Megatron's non-interleaved schedule).
//
// Stage s warms up with min(P-s-1, M) forwards, then alternates one forward and one
// backward until the forwards run out, then cools down with the remaining
// backwards. At most min(P-s, M) microbatches are in flight at stage s.
// Only V = 1: with chunks, use interleaved-1f1b (a chunk-major 1F1B would be a
// different schedule from the one Megatron and PyTorch ship, so it is refused).

import { PipelineShape, Task, task } from '../task';
import { ScheduleBuilder, backward, checkStage, requireSingleChunk } from './common';

function check(shape: PipelineShape): void {
  checkStage('1f1b', shape, 0);
  requireSingleChunk('1f1b', shape, 'use interleaved-1f1b for virtual stages');
}

function build(shape: PipelineShape, stage: number): Task[] {
  check(shape);
  checkStage('1f1b', shape, stage);
  const P = shape.stages;
  const M = shape.microbatches;
  const warmup = Math.min(P - stage - 1, M);
  const out: Task[] = [];
  for (let j = 0; j < warmup; j++) out.push(task('F', j));
  for (let i = 0; i < M - warmup; i++) {
    out.push(task('F', warmup + i));
    out.push(...backward(shape, i, 0));
  }
  for (let j = M - warmup; j < M; j++) out.push(...backward(shape, j, 0));
  return out;
}

export const oneFOneB: ScheduleBuilder = { name: '1f1b', splitBackward: false, check, build };
