// What a task does while it occupies its stage. The stage actor asks its compute to
// run a task and is told when it is done; emulated compute just holds the stage for a
// duration drawn from the workload profile (models/durations.ts).

import { Task } from '../policies/task';
import { Clock } from './clock';

export interface StageCompute {
  readonly kind: string;
  /** Run `t` of `iteration`; call `done` exactly once when it has finished. */
  run(iteration: number, t: Task, done: () => void): void;
}

export interface TaskDurations {
  compute(iteration: number, stage: number, t: Task): number;
}

export class EmulatedCompute implements StageCompute {
  readonly kind = 'emulated';
  constructor(private readonly clock: Clock, private readonly stage: number, private readonly durations: TaskDurations) {}

  run(iteration: number, t: Task, done: () => void): void {
    this.clock.setTimer(this.durations.compute(iteration, this.stage, t), done);
  }
}
