// A run's result: the statistics, validation and JSON summary of a finished job, from its
// events and the coordinator's records (the same for a local and a distributed run).

import { HintPolicy } from '../policies/hint';
import { PipelineShape } from '../policies/task';
import { lowerBound } from '../checks/lower-bound';
import { inflightCaps } from '../checks/slot-bound';
import { DurationModel } from '../models/durations';
import { measuredDurations } from '../checks/measured';
import { StoreStats } from '../actors/param-store';
import { IterationRecord } from '../actors/coordinator';
import { RejectTally, newRejectTally } from '../base/reject-tally';
import { BatonEvent } from '../stage/events';
import { JobConfig } from './config';
import { IterationStats, StageTotals, eventsByIteration, iterationStats, mean, totals } from '../checks/stats';
import { ValidationError, validateRun } from '../checks/validate';
import { LaneStageStats, eventsByLane, laneStageStats, tpInvariantProblems } from '../checks/lanes';
import { SwapLogEntry } from '../actors/policy-actor';
import { SwapRecord, swapRecords } from './swap-records';

export interface JobResult {
  config: JobConfig;
  shape: PipelineShape;
  policy: HintPolicy;
  clock: 'real' | 'virtual';
  transport: string;
  records: IterationRecord[];
  iterations: IterationStats[];
  totals: StageTotals;
  events: BatonEvent[];
  wallMs: number;
  /** What was rejected (bad messages from peers), first ones first; `totals.rejected` counts them all. */
  rejects: string[];
  /** A job with T > 1 or D > 1: per stage actor, compute, blocking, TP peer wait, TP coordination and deferrals (the rest is lane 0's). */
  lanes?: LaneStageStats[];
  /** The policy swaps of the run, each with where every stage adopted it (job/swap-records.ts). */
  swaps: SwapRecord[];
}

export function summarize(r: JobResult) {
  const makespan = mean(r.iterations.map((i) => i.makespan_ms));
  const lowerBound = mean(r.iterations.map((i) => i.lower_bound_ms));
  return {
    policy: r.policy.name,
    stages: r.shape.stages,
    microbatches: r.shape.microbatches,
    chunks: r.shape.chunks,
    seed: r.config.seed,
    profile: r.config.profile,
    jitter: r.config.jitter,
    jitter_scale: r.config.jitterScale,
    buffer_limit: r.config.bufferLimit,
    warmup_iterations: r.config.warmupIterations,
    partition: r.config.partition,
    stage_speeds: r.config.stageSpeeds,
    placement: r.config.placement,
    clock: r.clock,
    iterations: r.iterations.map((i) => ({
      iteration: i.iteration,
      makespan_ms: i.makespan_ms,
      lower_bound_ms: i.lower_bound_ms,
      lower_bound_term: i.lower_bound_term,
      efficiency: i.efficiency,
      bubble_fraction: i.bubble_fraction,
    })),
    makespan_ms: makespan,
    lower_bound_ms: lowerBound,
    // Which term of the bound set it (each iteration's, once each): critical-path, stage <s>, slot <s>.
    lower_bound_term: [...new Set(r.iterations.map((i) => i.lower_bound_term))].join(', '),
    inflight_caps: inflightCaps(r.policy, r.shape, r.config.bufferLimit),
    // A run of zero-length tasks takes no time and wastes none.
    efficiency: makespan > 0 ? lowerBound / makespan : 1,
    bubble_fraction: mean(r.iterations.map((i) => i.bubble_fraction)),
    peak_inflight: r.totals.peakInflight,
    tasks: r.totals.tasks,
    messages: r.totals.messages,
    bytes: r.totals.bytes,
    rejected: r.totals.rejected,
    ...(r.totals.resent > 0 ? { resent: r.totals.resent } : {}),
    wall_ms: r.wallMs,
    mode: r.config.mode,
    ...(r.config.mode === 'async' ? asyncStats(r) : {}),
    ...(r.swaps.length > 0 ? { swaps: r.swaps } : {}),
    ...(r.lanes ? laneSummary(r) : {}),
  };
}

/** A wide job's shape and its per-iteration breakdown: the mean stage actor's seconds and shares. */
export function laneSummary(r: JobResult) {
  const lanes = r.lanes ?? [];
  const n = Math.max(1, r.iterations.length) * Math.max(1, lanes.length);
  const sum = (f: (l: LaneStageStats) => number) => lanes.reduce((a, l) => a + f(l), 0) / n;
  const makespan = mean(r.iterations.map((i) => i.makespan_ms));
  const share = (ms: number) => (makespan > 0 ? ms / makespan : 0);
  const compute = sum((l) => l.compute_ms);
  const blocking = sum((l) => l.blocking_ms);
  const coord = sum((l) => l.tp_coordination_ms);
  const peer = sum((l) => l.tp_peer_wait_ms);
  return {
    tp: r.config.tp,
    dp: r.config.dp,
    ...(r.config.tp > 1 ? { rank_jitter: r.config.rankJitter } : {}),
    breakdown: {
      compute_ms: compute,
      blocking_ms: blocking,
      tp_coordination_ms: coord,
      tp_peer_wait_ms: peer,
      compute_share: share(compute),
      blocking_share: share(blocking),
      tp_coordination_share: share(coord),
      tp_peer_wait_share: share(peer),
    },
    deferrals: lanes.reduce((a, l) => a + l.deferrals, 0),
    lanes,
  };
}

/** Staleness and extra consistency state per stage, from the parameter stores' reports. */
export function asyncStats(r: JobResult) {
  const stores = r.records[r.records.length - 1].reports.map((x) => x.store as StoreStats | undefined);
  return {
    consistency: r.config.async.consistency,
    updates: stores.map((s) => s?.updates ?? 0),
    inflight_bound: stores.map((s) => s?.inflightBound ?? 0),
    delay: stores.map((s) => s?.delay ?? 0),
    staleness: stores.map((s) => ({ mean: s?.staleness.mean ?? 0, max: s?.staleness.max ?? 0 })),
    extra_state_bytes: stores.map((s) => s?.extraStateBytes ?? 0),
    // Per stage: each consistency policy it used, from which update (1-based) on, and the swap that brought it.
    consistency_eras: stores.map((s) => s?.consistencyEras ?? []),
  };
}

export interface ResultParts {
  cfg: JobConfig;
  shape: PipelineShape;
  policy: HintPolicy;
  records: IterationRecord[];
  events: BatonEvent[];
  clock: 'real' | 'virtual';
  transport: string;
  wallStart: number;
  validate: boolean;
  /** Validate only this config's iterations (the last attempt of a recovered job: its trace alone is whole). */
  validateAs?: JobConfig;
  /** False when stages ran in different processes (different clocks). */
  sharedClock?: boolean;
  /** The clock (machine) of each stage, when not all share one: see ValidateOptions.clockOf. */
  clockOf?: (stage: number) => string;
  /** Messages the coordinator refused (not a report of this job's current iteration): counted as rejected. */
  coordinatorRejects?: RejectTally;
  /** Other messages the launcher refused (trace batches of another launch): counted as rejected. */
  launcherRejects?: RejectTally;
  /** The policy actor's log of swaps. */
  swapLog?: readonly SwapLogEntry[];
}

const MAX_REJECTS_KEPT = 20;

/** Validate a finished run and compute its statistics (shared by local and distributed runs). */
export function buildResult(p: ResultParts): JobResult {
  const wide = (p.cfg.tp ?? 1) > 1 || (p.cfg.dp ?? 1) > 1;
  const byLane = wide ? eventsByLane(p.events) : null;
  // A wide job's statistics are lane 0's (rank 0 of replica 0): each lane is a whole pipeline.
  const events = byLane ? (byLane.get('0|0') ?? []) : p.events;
  const measured = measuredDurations(events, p.shape, p.sharedClock ?? true) as unknown as DurationModel;
  if (p.validate) {
    const problems: string[] = [];
    const vc = p.validateAs ?? p.cfg;
    const validated = vc === p.cfg ? p.events : p.events.filter((e) => e.iteration >= vc.firstIteration);
    for (const [key, laneEvents] of byLane ?? new Map([['0|0', validated]])) {
      const found = validateRun(laneEvents, p.shape, vc.warmupIterations + vc.iterations, {
        sharedClock: p.sharedClock ?? true,
        ...(p.clockOf ? { clockOf: p.clockOf } : {}),
        firstIteration: vc.firstIteration,
      });
      const [rank, replica] = key.split('|');
      problems.push(...(wide ? found.map((x) => `rank ${rank}, replica ${replica}: ${x}`) : found));
    }
    if (wide)
      problems.push(...tpInvariantProblems(p.events, { stages: p.shape.stages, ranks: p.cfg.tp, replicas: p.cfg.dp }));
    if (problems.length > 0) throw new ValidationError(problems);
  }
  const measuredRecords = p.records.slice(p.cfg.warmupIterations);
  const byIteration = eventsByIteration(events);
  // The slot term uses the in-flight cap this policy is held to at each stage (a binding schedule: its own).
  const caps = inflightCaps(p.policy, p.shape, p.cfg.bufferLimit);
  const iterations = measuredRecords.map((r) => {
    const lb = lowerBound(p.shape, r.iteration, measured, caps);
    return {
      ...iterationStats(r, byIteration.get(r.iteration) ?? [], p.shape.stages, lb.bound),
      lower_bound_term: lb.term,
    };
  });
  const measuredIterations = new Set(measuredRecords.map((r) => r.iteration));
  const t = totals(events, p.shape.stages, (it) => measuredIterations.has(it));
  if (wide) t.rejected = p.events.filter((e) => e.type === 'reject').length;
  const coordinatorRejects = p.coordinatorRejects ?? newRejectTally();
  const launcherRejects = p.launcherRejects ?? newRejectTally();
  const rejects = [
    ...[
      ...coordinatorRejects.first.map((d) => `coordinator: ${d}`),
      ...launcherRejects.first.map((d) => `launcher: ${d}`),
    ].slice(0, MAX_REJECTS_KEPT / 2),
    ...p.events
      .flatMap((e) =>
        e.type !== 'reject'
          ? []
          : e.detail.startsWith(`stage ${e.stage}:`)
            ? [e.detail]
            : [`stage ${e.stage}: ${e.detail}`],
      )
      .slice(0, MAX_REJECTS_KEPT / 2),
  ];
  return {
    config: p.cfg,
    shape: p.shape,
    policy: p.policy,
    clock: p.clock,
    transport: p.transport,
    records: measuredRecords,
    iterations,
    totals: { ...t, rejected: t.rejected + coordinatorRejects.count + launcherRejects.count },
    events: p.events,
    wallMs: performance.now() - p.wallStart,
    rejects,
    ...(wide ? { lanes: laneStageStats(p.events, (it) => measuredIterations.has(it)) } : {}),
    swaps: swapRecords(p.swapLog ?? [], p.events, p.records[0]?.start ?? 0),
  };
}
