// Tensor-parallel coordination of one rank (RRFP §4.2 and appendix D), as pure bookkeeping
// the stage's transition calls. Before a task that runs collectives (an F or B when the
// stage is T > 1 ranks wide) the rank proposes its arbiter's pick to its group; the group
// exchanges the proposals (a scalar all-gather, actors/tp-group.ts) and answers with every
// rank's candidate. All equal: the rank runs it. Otherwise no rank runs it, the arbiter's
// memory is not advanced and the candidate stays ready, so the next attempt starts from the
// same point of the hint order; the rank proposes again once its ready set has changed
// since its last proposal opened, or once a peer has opened the next round. W tasks run no
// collectives and skip all of this. No clock, bus or actor here.

import { Task, formatTask, sameTask } from '../policies/task';

export interface TpSetup {
  /** T: ranks of the stage's tensor-parallel group. */
  readonly ranks: number;
  /** This rank, 0 … T−1. */
  readonly rank: number;
}

export interface TpState {
  /** Rounds this rank has taken part in (the next proposal is round `round`). */
  round: number;
  /** The task proposed in the open round, or null when no round is open. */
  proposing: {
    readonly iteration: number;
    readonly task: Task;
    readonly at: number;
    /** The arbiter was draining under backpressure when it picked the task. */
    readonly backpressure: boolean;
    /** `version` when the round opened: a change after it counts for the retry. */
    readonly version: number;
  } | null;
  /** Counts readiness changes (arrivals, completions): a retry needs one since the last proposal. */
  version: number;
  /** `version` when the last deferred round opened, or null when nothing is deferred. */
  deferredAt: number | null;
  /** The highest round a peer has proposed in. */
  peerRound: number;
  /** Rounds that ended without agreement. */
  deferrals: number;
}

export function initialTpState(): TpState {
  return { round: 0, proposing: null, version: 0, deferredAt: null, peerRound: -1, deferrals: 0 };
}

/** Whether running `t` needs the group's agreement (it runs collectives: F and B when T > 1). */
export function needsAgreement(t: Task, tp: TpSetup | undefined): boolean {
  return tp !== undefined && tp.ranks > 1 && t.kind !== 'W';
}

/** Whether the rank may open its next round now: none is open, and after a deferral something changed. */
export function mayPropose(s: TpState): boolean {
  if (s.proposing !== null) return false;
  if (s.deferredAt === null) return true;
  return s.version > s.deferredAt || s.peerRound >= s.round;
}

/** The agreed task of a round's candidates (one per rank, in rank order), or null when they differ. */
export function agreedTask(candidates: readonly Task[]): Task | null {
  if (candidates.length === 0) return null;
  const first = candidates[0];
  return candidates.every((c) => sameTask(c, first)) ? first : null;
}

/** Open a round for `task`: returns the round number to propose in. */
export function openRound(s: TpState, iteration: number, task: Task, now: number, backpressure = false): number {
  if (s.proposing !== null)
    throw new Error(`round ${s.round} is open for ${formatTask(s.proposing.task)}; one proposal at a time`);
  s.proposing = { iteration, task, at: now, backpressure, version: s.version };
  return s.round;
}

/**
 * Close the open round with the group's candidates: the task to run when all agree (and it
 * is this rank's proposal), else null (deferred: retry after a readiness change or a peer's
 * next round). Throws on an answer for another round, which the group never sends.
 */
export function closeRound(s: TpState, round: number, candidates: readonly Task[]): Task | null {
  const open = s.proposing;
  if (open === null || round !== s.round)
    throw new Error(`agreement for round ${round}, but ${open ? `round ${s.round} is open` : 'no round is open'}`);
  s.proposing = null;
  s.round++;
  const agreed = agreedTask(candidates);
  if (agreed !== null && sameTask(agreed, open.task)) {
    s.deferredAt = null;
    return open.task;
  }
  s.deferrals++;
  s.deferredAt = open.version;
  return null;
}

/** A peer proposed in `round` (the group tells each rank): a deferred rank may retry. */
export function notePeerRound(s: TpState, round: number): void {
  if (round > s.peerRound) s.peerRound = round;
}
