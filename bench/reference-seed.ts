// One instance of the reference benchmark (bench/offline-reference.ts): bf on one seed of one
// cell, its lower bound and offline reference, bfw and binding 1f1b, and the relaxation if
// asked. Plain data in and out, so bench/reference-worker.ts can run it on another thread.

import { JobConfig, resolveConfig } from '../job/config';
import { JobResult, runJob, summarize } from '../job/run-local';
import { runReference } from '../job/run-reference';
import { offlineReference } from '../checks/offline-reference';
import { freeStages } from '../checks/offline-relax';
import { measuredDurations } from '../checks/measured';
import { DurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { inflightCaps } from '../checks/slot-bound';
import { mean } from '../checks/stats';

export const COLUMNS = ['bound', 'offline', 'bf', 'bfw', '1f1b', 'bf/offline', 'offline/bound'] as const;
export const RELAX_COLUMNS = ['relaxed', 'relaxed/bound'] as const;
export type Column = (typeof COLUMNS)[number] | (typeof RELAX_COLUMNS)[number];

/** One instance to measure: the job's settings and the stages to free (--relax), if any. */
export interface SeedTask {
  base: Partial<JobConfig>;
  free?: number[];
}

export interface SeedMeasure {
  row: Partial<Record<Column, number>>;
  /** The lower-bound term that set the bound (e.g. "slot 0"). */
  term: string;
  evaluations: number;
  /** Wall time of the offline search, ms. */
  offlineMs: number;
}

async function run(c: Partial<JobConfig>): Promise<JobResult> {
  return runJob(resolveConfig(c), { clock: 'virtual' });
}

export async function measureSeed({ base, free }: SeedTask): Promise<SeedMeasure> {
  const bf = await run({ ...base, policy: 'bf' });
  const t0 = performance.now();
  const ref = runReference(bf, true);
  const offlineMs = performance.now() - t0;
  const s = summarize(bf);
  const bfw = summarize(await run({ ...base, policy: 'bfw' }));
  const oneF = summarize(await run({ ...base, policy: '1f1b' }));
  const row: Partial<Record<Column, number>> = {
    bound: s.lower_bound_ms,
    offline: ref.offline_ms,
    bf: s.makespan_ms,
    bfw: bfw.makespan_ms,
    '1f1b': oneF.makespan_ms,
    'bf/offline': s.makespan_ms / ref.offline_ms,
    'offline/bound': ref.offline_ms / s.lower_bound_ms,
  };
  if (free) {
    const x = relaxedOffline(bf, free);
    Object.assign(row, { relaxed: x.relaxed, 'relaxed/bound': x.relaxed / x.bound });
  }
  return { row, term: s.lower_bound_term, evaluations: ref.offline_evaluations, offlineMs };
}

/**
 * The offline search's makespan with `free` made free and the lower bound of that relaxed
 * instance (the same caps), each averaged over the run's measured iterations (as offline_ms).
 */
function relaxedOffline(r: JobResult, free: number[]): { relaxed: number; bound: number } {
  const relaxed = freeStages(r.shape, measuredDurations(r.events, r.shape, true) as unknown as DurationModel, free);
  const caps = inflightCaps(r.policy, r.shape, r.config.bufferLimit);
  const runs = r.iterations.map((i) => ({
    relaxed: offlineReference(r.shape, i.iteration, relaxed, r.config.bufferLimit, { seed: r.config.seed }).makespan,
    bound: lowerBound(r.shape, i.iteration, relaxed, caps).bound,
  }));
  return { relaxed: mean(runs.map((x) => x.relaxed)), bound: mean(runs.map((x) => x.bound)) };
}
