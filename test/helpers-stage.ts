import { formatTask } from '../policies/task';
import { stageStep } from '../stage/stage-logic';
import { StageEffect, StageState } from '../stage/stage-state';

/**
 * Runs a stage on from effects `fx`: each task it starts is done at once (at time `now`) in
 * `iteration`, until it starts none. Returns the tasks run, in order, and the last effects.
 */
export function runTasks(
  s: StageState,
  fx: StageEffect[],
  iteration: number,
  now: number,
): { ran: string[]; fx: StageEffect[] } {
  const ran: string[] = [];
  for (let run = fx.find((f) => f.type === 'run'); run && run.type === 'run'; run = fx.find((f) => f.type === 'run')) {
    ran.push(formatTask(run.task));
    fx = stageStep(s, { type: 'done', iteration, task: run.task }, now);
  }
  return { ran, fx };
}
