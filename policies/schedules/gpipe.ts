// GPipe: every forward of the iteration, then every backward.
//
// With V > 1 chunks the order is chunk-major (PyTorch calls it "looped BFS"): all
// microbatches through chunk 0, then chunk 1, ...; backwards from the last chunk
// down to chunk 0. With split backward each W follows its B immediately.

import { PipelineShape, Task, task } from '../task';
import { ScheduleBuilder, backward, checkStage } from './common';

function check(shape: PipelineShape): void {
  checkStage('gpipe', shape, 0);
}

function build(shape: PipelineShape, stage: number): Task[] {
  checkStage('gpipe', shape, stage);
  const { chunks: V, microbatches: M } = shape;
  const out: Task[] = [];
  for (let c = 0; c < V; c++) for (let j = 0; j < M; j++) out.push(task('F', j, c));
  for (let c = V - 1; c >= 0; c--) for (let j = 0; j < M; j++) out.push(...backward(shape, j, c));
  return out;
}

export const gpipe: ScheduleBuilder = { name: 'gpipe', splitBackward: false, check, build };
