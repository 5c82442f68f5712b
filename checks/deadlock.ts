// A deadlock (every actor idle, work left) ends a run with an error that names the
// stuck stages, their buffers and the tasks they wait for, plus the last events. Its time
// is counted from the start of the job.

import { BatonEvent } from '../stage/events';
import { StageStatus } from '../stage/stage-state';

export class DeadlockError extends Error {
  override name = 'DeadlockError';
  constructor(
    readonly statuses: StageStatus[],
    readonly timeline: BatonEvent[],
    readonly at: number,
  ) {
    super(describeDeadlock(statuses, at));
  }
}

export function describeDeadlock(statuses: StageStatus[], at: number): string {
  const stuck = statuses.filter((s) => s.remaining > 0 && s.running === null);
  // A stage with nothing left of its iteration is stuck too when the others have begun a
  // later one, or arrivals for one wait at it: its start has not come (lost, or not sent).
  const begun = statuses.flatMap((s) => (s.iteration === null ? [] : [s.iteration]));
  const latest = begun.length > 0 ? Math.max(...begun) : null;
  const unstarted = statuses.filter(
    (s) =>
      s.remaining === 0 &&
      s.running === null &&
      ((s.held ?? 0) > 0 || (latest !== null && (s.iteration === null || s.iteration < latest))),
  );
  const stuckLine = (s: StageStatus) =>
    [
      `stage ${s.stage}${s.lane ? ` ${s.lane}` : ''}, iteration ${s.iteration}: idle with ${s.remaining} tasks left, ${s.inflight} forwards in flight`,
      `forward-ready=[${s.forwardReady.join(' ')}] backward-ready=[${s.backwardReady.join(' ')}]` +
        (s.weightReady.length ? ` weight-ready=[${s.weightReady.join(' ')}]` : ''),
      s.waitingFor.length > 0
        ? `waiting for ${s.waitingFor.slice(0, 8).join(', ')}${s.waitingFor.length > 8 ? `, … (${s.waitingFor.length} in all)` : ''}`
        : s.forwardReady.length + s.backwardReady.length + s.weightReady.length > 0
          ? 'waiting for no input: its policy picks none of its ready tasks'
          : 'waiting for no input it knows of (no start for this iteration?)',
    ].join('; ');
  const unstartedLine = (s: StageStatus) =>
    `stage ${s.stage}${s.lane ? ` ${s.lane}` : ''}: waiting for the start of iteration ${s.heldIteration ?? latest}, ` +
    `${s.iteration === null ? 'none started yet' : `iteration ${s.iteration} finished`}; ${s.held ?? 0} input(s) and gradient(s) for it held`;
  // In a wide job a rank still running is what its group's peers wait for: name it.
  const holding = statuses.filter((s) => s.lane && s.running !== null && stuck.some((x) => x.stage === s.stage));
  const lines = [
    ...stuck.map((s) => ({ stage: s.stage, line: stuckLine(s) })),
    ...holding.map((s) => ({
      stage: s.stage,
      line: `stage ${s.stage} ${s.lane}, iteration ${s.iteration}: still running ${s.running}, never answered (its TP group waits for it)`,
    })),
    ...unstarted.map((s) => ({ stage: s.stage, line: unstartedLine(s) })),
  ]
    .sort((a, b) => a.stage - b.stage)
    .map((l) => l.line);
  return `deadlock at t=${at.toFixed(3)} ms: ${lines.length} stage(s) idle with work left\n  ${lines.join('\n  ')}`;
}
