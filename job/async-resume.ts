// Which updates a recovery of an asynchronous job loses (job/async-recovery.ts): pure
// bookkeeping over the counts of the states the stages resume from.
//
// The job's microbatches are one stream, numbered from 0 to total - 1. A stage's state
// (a snapshot, or the seed's parameters) has applied `updates` of the microbatches before
// its `next`, and recoveries made it skip `skipped` of them; the rest before `next` were in
// flight when the snapshot was taken. A recovery restores every stage from its newest
// state and starts the stream again at n, one past the highest microbatch any of those
// states has applied: no state has seen a microbatch from n on, so each is fed once more
// at every stage. At each stage every microbatch before n it has not applied is skipped
// for good: that stage never updates with it. (When every microbatch was applied somewhere
// the stream resumes at its last one, and a stage whose state has it does not apply it again.)
//
// The updates a stage made after the snapshot it resumes from are lost: those of its
// microbatches from n on are made again (at other weights), those before n are skipped. The launcher counts them from the backwards in the failed attempt's trace
// (at least that many: a killed process's last trace batch dies with it), less the backwards
// of microbatches below the stage's floor, which a resumed store runs without updating.

import type { SnapshotCounts } from '../actors/param-store-snapshot';

export interface AsyncResumePlan {
  /** The microbatch the stream resumes at. */
  readonly next: number;
  /** Per stage: microbatches this recovery makes it skip (before its floor, never applied, not skipped before). */
  readonly skipped: number[];
  /** Per stage: the counts it resumes with (its floor as `next`). */
  readonly resumed: SnapshotCounts[];
}

/** The plan for stages resuming from states with these counts, in a stream of `total` microbatches. */
export function asyncResumePlan(states: readonly SnapshotCounts[], total: number): AsyncResumePlan {
  if (!Number.isInteger(total) || total < 1) throw new RangeError(`a stream of ${total} microbatches`);
  for (const [s, c] of states.entries())
    if (c.updates + c.skipped > c.next || c.next > total)
      throw new RangeError(
        `stage ${s}: ${c.updates} updates and ${c.skipped} skipped before microbatch ${c.next} of ${total}`,
      );
  const next = Math.min(total - 1, Math.max(0, ...states.map((c) => c.next)));
  const resumed = states.map((c) => {
    const floor = Math.max(next, c.next);
    return { updates: c.updates, next: floor, skipped: floor - c.updates };
  });
  return { next, skipped: resumed.map((r, s) => r.skipped - states[s].skipped), resumed };
}

/** Per stage: the microbatches from the stream's resumption up to its floor, fed to it again but not applied (their backwards make no update). */
export function belowFloor(plan: AsyncResumePlan): number[] {
  return plan.resumed.map((r) => r.next - plan.next);
}

/**
 * Per stage: updates made after the state it resumes from, lost, at least: the
 * updates it started the failed attempt with plus the backwards the trace showed, less
 * those of the attempt's below-floor microbatches (`belowFloorAtStart`: belowFloor of the
 * plan it started from, which ran backwards without updating), less the resumed state's
 * updates (never below 0).
 */
export function lostUpdates(
  startUpdates: readonly number[],
  backwardsSeen: readonly number[],
  belowFloorAtStart: readonly number[],
  resumedFrom: readonly number[],
): number[] {
  return resumedFrom.map((u, s) =>
    Math.max(0, startUpdates[s] + Math.max(0, backwardsSeen[s] - belowFloorAtStart[s]) - u),
  );
}
