// Shared pieces of the fixed schedules: the builder interface, the check every
// schedule starts with, and the text form of a per-stage list.
//
// A schedule is a pure function (shape, stage) -> the tasks that stage runs in one
// iteration, in order. It knows nothing about readiness or time.

import { PipelineShape, ShapeError, Task, formatTask, task, validateShape } from '../task';

export interface ScheduleBuilder {
  /** The binding policy name, e.g. `1f1b`; the hint variant is `hint:<name>`. */
  readonly name: string;
  /** The schedule is defined over split backward (B and W as separate tasks). */
  readonly splitBackward: boolean;
  /** Throws ShapeError when the schedule cannot be built for `shape`. */
  check(shape: PipelineShape): void;
  /** The task list of `stage` for one iteration; calls `check` first. */
  build(shape: PipelineShape, stage: number): Task[];
}

/** Validates the shape and the stage index, quoting the schedule name. */
export function checkStage(name: string, shape: PipelineShape, stage: number): void {
  validateShape(shape);
  if (!Number.isInteger(stage) || stage < 0 || stage >= shape.stages)
    throw new ShapeError(`${name}: stage must be an integer in [0, ${shape.stages - 1}], got ${JSON.stringify(stage)}`);
}

export function requireSingleChunk(name: string, shape: PipelineShape, hint: string): void {
  if (shape.chunks !== 1) throw new ShapeError(`${name} needs chunks = 1, got chunks = ${shape.chunks}; ${hint}`);
}

export function requireSplit(name: string, shape: PipelineShape): void {
  if (!shape.splitBackward)
    throw new ShapeError(`${name} needs splitBackward: true (B and W as separate tasks), got false`);
}

/**
 * The backward of a schedule written for a whole backward. With split backward,
 * W(j,c) runs right after its B(j,c): the same memory profile as the unsplit order.
 */
export function backward(shape: PipelineShape, mb: number, chunk: number): Task[] {
  return shape.splitBackward ? [task('B', mb, chunk), task('W', mb, chunk)] : [task('B', mb, chunk)];
}

/** `F0 F1 B0 ...`, the form the tests pin and traces print. */
export function scheduleText(tasks: readonly Task[]): string {
  return tasks.map(formatTask).join(' ');
}
