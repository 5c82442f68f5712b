import { formatTask } from '../policies/task';
import { stageStep } from '../stage/stage-logic';
import { StageEffect, StageState, StageStatus } from '../stage/stage-state';

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

/**
 * The status of a stage in iteration 0 with `remaining` tasks left, `forwardReady` ready and
 * nothing running; unless `s` says otherwise nothing in flight, waited for or held, idle since 0.
 */
export function idleStatus(
  s: Pick<StageStatus, 'stage' | 'remaining' | 'forwardReady'> & Partial<StageStatus>,
): StageStatus {
  return {
    iteration: 0,
    running: null,
    inflight: 0,
    backwardReady: [],
    weightReady: [],
    waitingFor: [],
    idleSince: 0,
    held: 0,
    heldIteration: null,
    ...s,
  };
}
