// What a task does while it occupies its stage. The stage actor asks its compute to
// run a task and is told when it is done; emulated compute just holds the stage for a
// duration drawn from the workload profile (models/durations.ts).

import { Task } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { Clock } from './clock';

export interface StageCompute {
  readonly kind: string;
  /** True when run() computes synchronously on this thread (real tfjs compute), holding the event loop until it returns. */
  readonly blocking?: boolean;
  /** Run `t` of `iteration`; call `done` exactly once when it has finished, with the tensors to send on. */
  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void;
  /** Tensors that arrived with an activation ('input') or a gradient ('grad'). */
  accept?(iteration: number, kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void;
  /** End of a synchronous iteration (the optimizer step); resolves with fields for the stage's report. */
  endIteration?(iteration: number): Promise<Record<string, unknown>>;
  dispose?(): void;
}

export interface TaskDurations {
  compute(iteration: number, stage: number, t: Task): number;
}

export class EmulatedCompute implements StageCompute {
  readonly kind = 'emulated';
  constructor(private readonly clock: Clock, private readonly stage: number, private readonly durations: TaskDurations) {}

  run(iteration: number, t: Task, done: () => void): void {
    this.clock.setTimer(this.durations.compute(iteration, this.stage, t), () => done());
  }
}
