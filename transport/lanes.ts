// Where a stage actor sits in a job of D replicas × P stages × T tensor-parallel ranks: its
// lane (rank, replica), and the subjects that address it. A job with one rank and one
// replica keeps the plain subjects baton.<job>.<kind>.<stage>; a wider one adds the rank and
// the replica, baton.<job>.<kind>.<stage>.<rank>.<replica>, so `baton.<job>.*.3.*.0` watches
// stage 3's tensor-parallel group of replica 0 and `baton.<job>.*.*.*.1` all of replica 1.

import { SubjectKind, subject } from './subjects';

export interface Lane {
  /** This actor's tensor-parallel rank, 0 … ranks−1. */
  readonly rank: number;
  /** This actor's data-parallel replica, 0 … replicas−1. */
  readonly replica: number;
  /** T: ranks per stage. */
  readonly ranks: number;
  /** D: replicas of the pipeline. */
  readonly replicas: number;
}

/** The lane of a job with one rank and one replica. */
export const SINGLE_LANE: Lane = { rank: 0, replica: 0, ranks: 1, replicas: 1 };

export const isWide = (l: Lane | undefined): l is Lane => l !== undefined && (l.ranks > 1 || l.replicas > 1);

/** Every lane of a T × D job, replica-major: index replica·T + rank. */
export function lanesOf(ranks: number, replicas: number): Lane[] {
  const out: Lane[] = [];
  for (let replica = 0; replica < replicas; replica++)
    for (let rank = 0; rank < ranks; rank++) out.push({ rank, replica, ranks, replicas });
  return out;
}

export const laneIndex = (l: Pick<Lane, 'rank' | 'replica' | 'ranks'>): number => l.replica * l.ranks + l.rank;

/** The subject of `kind` for `stage` in `lane` (plain without a wide lane). */
export function laneSubject(job: string, kind: SubjectKind, stage: number, lane?: Lane): string {
  const s = subject(job, kind, stage);
  return isWide(lane) ? `${s}.${lane.rank}.${lane.replica}` : s;
}

/** How actors and errors name a stage actor: `2`, or `2.r1.d0` in a wide job. */
export function laneName(stage: number, lane?: Lane): string {
  return isWide(lane) ? `${stage}.r${lane.rank}.d${lane.replica}` : `${stage}`;
}
