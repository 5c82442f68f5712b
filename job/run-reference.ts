// The offline reference of a finished run (checks/offline-reference.ts) on that run's own
// realized durations and message times (checks/measured.ts), iteration by iteration, under
// the job's buffer limit as the runtime holds a readiness-driven policy to it (at most the
// limit in flight at each stage; limit + V interleaved): what a schedule that knew every duration in
// advance would have taken, beside what the run took. Opt-in: it costs a search per
// iteration (a few seconds for P=8, M=64 on this machine; up to about three minutes, five at
// P=16, on an instance whose reference stays more than 5% above the bound:
// checks/offline-reference.ts steps 5 to 8).

import { OfflineOptions, ScheduledTask, offlineReference } from '../checks/offline-reference';
import { DurationModel } from '../models/durations';
import { JobResult } from './run-result';
import { measuredDurations } from '../checks/measured';
import { mean } from '../checks/stats';

export interface RunReference {
  /** Mean over the measured iterations of the offline schedule's makespan. */
  offline_ms: number;
  /** offline_ms / the run's makespan: 1 = as good as hindsight, above 1 = better than the reference found. */
  efficiency_vs_offline: number;
  offline_iterations: { iteration: number; offline_ms: number }[];
  offline_caps: number[];
  offline_evaluations: number;
  offline_method: string;
}

/**
 * `sharedClock`: false when the stages ran in several processes (message times then count as 0, as in the bound).
 * `onSearched`: told after each iteration's search, with its schedule (for progress lines and charts).
 */
export function runReference(
  r: JobResult,
  sharedClock: boolean,
  opts: OfflineOptions = {},
  onSearched?: (iteration: number, offlineMs: number, searchMs: number, schedule: ScheduledTask[]) => void,
): RunReference {
  const measured = measuredDurations(r.events, r.shape, sharedClock) as unknown as DurationModel;
  let evaluations = 0,
    method = '',
    caps: number[] = [];
  const iterations = r.iterations.map((it) => {
    const t0 = performance.now();
    const o = offlineReference(r.shape, it.iteration, measured, r.config.bufferLimit, { seed: r.config.seed, ...opts });
    onSearched?.(it.iteration, o.makespan, performance.now() - t0, o.schedule);
    evaluations += o.evaluations;
    method = o.method;
    caps = o.caps;
    return { iteration: it.iteration, offline_ms: o.makespan };
  });
  const offline = mean(iterations.map((i) => i.offline_ms));
  const makespan = mean(r.iterations.map((i) => i.makespan_ms));
  return {
    offline_ms: offline,
    efficiency_vs_offline: makespan > 0 ? offline / makespan : 1,
    offline_iterations: iterations,
    offline_caps: caps,
    offline_evaluations: evaluations,
    offline_method: method,
  };
}
