import { PipelineShape, Task, backwardPredecessor, forwardPredecessor, task } from '../policies/task';

/** A pipeline shape of `stages` × `microbatches`, `chunks` per stage, backward split or not. */
export const shape = (stages: number, microbatches: number, chunks = 1, splitBackward = false): PipelineShape => ({
  stages,
  chunks,
  microbatches,
  splitBackward,
});

/** What task `t` of `stage` waits for: the task, its stage, whether its output crosses the bus, and how a problem names it. */
export interface Dependency {
  readonly stage: number;
  readonly task: Task;
  readonly remote: boolean;
  readonly what: string;
}

export function dependenciesOf(stage: number, t: Task, s: PipelineShape): Dependency[] {
  if (t.kind === 'W') return [{ stage, task: task('B', t.mb, t.chunk), remote: false, what: 'its backward' }];
  if (t.kind === 'F') {
    const p = forwardPredecessor(stage, t.chunk, s);
    return p === null ? [] : [{ stage: p.stage, task: task('F', t.mb, p.chunk), remote: true, what: 'its input from' }];
  }
  const own: Dependency = { stage, task: task('F', t.mb, t.chunk), remote: false, what: 'its forward' };
  const g = backwardPredecessor(stage, t.chunk, s);
  return g === null
    ? [own]
    : [own, { stage: g.stage, task: task('B', t.mb, g.chunk), remote: true, what: 'its gradient from' }];
}
