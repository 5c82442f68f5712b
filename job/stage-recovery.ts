// What the stages of a recoverable job are told in their host request (job/recovery.ts):
// how often to send their state (every N flushes, or N updates asynchronously), and, when
// iterations are replayed, the state to start from. The wire form is plain data sealed like
// every request; what does not have its shape is refused before any stage is built.

import type { StageSnapshot } from '../compute/chunk-optimizer';
import { snapshotProblem } from '../checks/report-body';
import { asyncSnapshotProblem } from '../actors/param-store-snapshot';
import { quoteValue } from '../base/quote';
import { JobConfigError } from './wire-stage';

/** What one stage of a recoverable job is handed: its state to start from, and how often to send its own. */
export interface StageRecovery {
  readonly resume?: StageSnapshot;
  /** Send the state every this many flushes (sync) or updates (async); 0: never. */
  readonly stateEvery: number;
}

/** A host request's `recovery` field: how often to send state, and per stage (by number) the state to start from. */
export interface HostRecovery {
  readonly stateEvery: number;
  readonly resume?: Readonly<Record<string, StageSnapshot>>;
}

/** The host request's recovery field, checked (an asynchronous job's resume entries as asynchronous snapshots, before any stage is built); undefined when absent (a job that does not recover). */
export function checkHostRecovery(v: unknown, stages: number, async: boolean): HostRecovery | undefined {
  if (v === undefined) return undefined;
  const bad = (what: string) => new JobConfigError(`host: recovery ${what}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad(`must be a map, got ${quoteValue(v, 60)}`);
  const { stateEvery, resume, ...rest } = v as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw bad(`has unknown field ${quoteValue(extra[0], 60)}`);
  if (!Number.isSafeInteger(stateEvery) || (stateEvery as number) < 0)
    throw bad(`stateEvery must be an integer >= 0, got ${quoteValue(stateEvery, 60)}`);
  const every = stateEvery as number;
  if (resume === undefined) return { stateEvery: every };
  if (typeof resume !== 'object' || resume === null || Array.isArray(resume))
    throw bad(`resume must be a map of stage snapshots, got ${quoteValue(resume, 60)}`);
  for (const [s, snap] of Object.entries(resume)) {
    if (!/^\d+$/.test(s) || Number(s) >= stages)
      throw bad(`resume names stage ${quoteValue(s, 20)}, not one of this job's`);
    const problem = async ? asyncSnapshotProblem(snap) : snapshotProblem(snap);
    if (problem)
      throw bad(`resume for stage ${s} is not ${async ? 'an asynchronous' : 'a stage'} snapshot (${problem})`);
  }
  return { stateEvery: every, resume: resume as Record<string, StageSnapshot> };
}

/** What stage `stage` is handed of a host request's recovery field. */
export function stageRecoveryOf(r: HostRecovery | undefined, stage: number): StageRecovery | undefined {
  if (!r) return undefined;
  const resume = r.resume?.[String(stage)];
  return resume ? { stateEvery: r.stateEvery, resume } : { stateEvery: r.stateEvery };
}

/** What the node hosting `stages` is told of a job's recovery: only its own stages' states. */
export function recoveryForStages(r: HostRecovery, stages: readonly number[]): HostRecovery {
  if (!r.resume) return { stateEvery: r.stateEvery };
  const resume = r.resume;
  return { stateEvery: r.stateEvery, resume: Object.fromEntries(stages.map((s) => [String(s), resume[String(s)]])) };
}
