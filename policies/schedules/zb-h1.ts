// ZB-H1 (Zero Bubble, handcrafted schedule 1; Qi et al. 2023).
//
// Backward is split into B (input gradient, on the critical path) and W (weight
// gradient, local only). Step x = 0 .. M+P-2 at stage s runs, each when its
// microbatch index lies in [0, M):  F(x), then B(x-(P-1-s)), then W(x-(P-1)).
// So stage s warms up with P-1-s lone forwards, runs s steps of F+B whose W is
// postponed, then F+B+W; at the end it runs P-1-s steps of B+W and s lone W's that
// fill the cool-down bubble. A microbatch's activations stay until its W, and at
// most min(P, M) are held at any stage: the peak of 1F1B (stage 0).
// Only V = 1 and split backward.

import { PipelineShape, Task, task } from '../task';
import { ScheduleBuilder, checkStage, requireSingleChunk, requireSplit } from './common';

function check(shape: PipelineShape): void {
  checkStage('zb-h1', shape, 0);
  requireSingleChunk('zb-h1', shape, 'ZB-H1 is defined for one chunk per stage');
  requireSplit('zb-h1', shape);
}

function build(shape: PipelineShape, stage: number): Task[] {
  check(shape);
  checkStage('zb-h1', shape, stage);
  const P = shape.stages;
  const M = shape.microbatches;
  const inRange = (j: number) => j >= 0 && j < M;
  const out: Task[] = [];
  for (let x = 0; x < M + P - 1; x++) {
    if (inRange(x)) out.push(task('F', x));
    const b = x - (P - 1 - stage);
    if (inRange(b)) out.push(task('B', b));
    const w = x - (P - 1);
    if (inRange(w)) out.push(task('W', w));
  }
  return out;
}

export const zbH1: ScheduleBuilder = { name: 'zb-h1', splitBackward: true, check, build };
