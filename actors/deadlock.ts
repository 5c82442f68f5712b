// A deadlock (every actor idle, work left) ends a run with an error that names the
// stuck stages, their buffers and the tasks they wait for, plus the last events. Its time
// is counted from the start of the job.

import { BatonEvent } from './events';
import { StageStatus } from './stage-logic';

export class DeadlockError extends Error {
  override name = 'DeadlockError';
  constructor(readonly statuses: StageStatus[], readonly timeline: BatonEvent[], readonly at: number) {
    super(describeDeadlock(statuses, at));
  }
}

export function describeDeadlock(statuses: StageStatus[], at: number): string {
  const stuck = statuses.filter((s) => s.remaining > 0 && s.running === null);
  const lines = stuck.map((s) => {
    const parts = [
      `stage ${s.stage}, iteration ${s.iteration}: idle with ${s.remaining} tasks left, ${s.inflight} forwards in flight`,
      `forward-ready=[${s.forwardReady.join(' ')}] backward-ready=[${s.backwardReady.join(' ')}]` +
        (s.weightReady.length ? ` weight-ready=[${s.weightReady.join(' ')}]` : ''),
      s.waitingFor.length > 0
        ? `waiting for ${s.waitingFor.slice(0, 8).join(', ')}${s.waitingFor.length > 8 ? `, … (${s.waitingFor.length} in all)` : ''}`
        : s.forwardReady.length + s.backwardReady.length + s.weightReady.length > 0
          ? 'waiting for no input: its policy picks none of its ready tasks'
          : 'waiting for no input it knows of (no start for this iteration?)',
    ];
    return parts.join('; ');
  });
  return `deadlock at t=${at.toFixed(3)} ms: ${stuck.length} stage(s) idle with work left\n  ${lines.join('\n  ')}`;
}
