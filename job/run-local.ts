// One job in one process: every stage's actors (stage, sender, receiver), the
// coordinator and a bus, on the real or the virtual clock. `baton sim` is this with the
// virtual clock and the in-process bus; the same wiring runs over NATS.

import { HintPolicy } from '../policies/hint';
import { PipelineShape } from '../policies/task';
import { lowerBound } from '../checks/lower-bound';
import { DurationModel } from '../models/durations';
import { measuredDurations } from '../checks/measured';
import { StoreStats } from '../actors/param-store';
import { Bus, Subscription } from '../transport/bus';
import { LocalBus } from '../transport/local-bus';
import { newLaunchId } from '../transport/envelope';
import { Clock, RealClock, VirtualClock } from '../base/clock';
import { StageCompute } from '../stage/compute';
import { IterationRecord, coordinate } from '../actors/coordinator';
import { RejectTally, newRejectTally } from '../base/reject-tally';
import { DeadlockError } from '../checks/deadlock';
import { BatonEvent, EventSink } from '../stage/events';
import { JobConfig } from './config';
import { ActorRuntime, ActorRef } from '../actors/runtime';
import { StageActorMsg } from '../actors/stage';
import { StageStatus } from '../stage/stage-logic';
import { JobError, durationModelFor, loadTrainingBackend, planJob, wireStage } from './wire-stage';

export { JobError, planJob } from './wire-stage';
import { IterationStats, StageTotals, eventsByIteration, iterationStats, mean, totals } from '../checks/stats';
import { ValidationError, validateRun } from '../checks/validate';
import { requiredReportFields } from '../checks/report-body';

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
}

export interface RunOptions {
  clock: 'virtual' | 'real';
  /** Defaults to a new in-process bus. */
  bus?: Bus;
  /** Extra event consumers (trace publishers, live printers). */
  sinks?: EventSink[];
  /** Replace the compute the config implies (emulated or tfjs) with another. */
  computeFor?: (stage: number, clock: Clock) => StageCompute;
  /** Called by the coordinator as each iteration ends (progress output). */
  onIteration?: (r: IterationRecord) => void;
  /** Validate the run (default true). */
  validate?: boolean;
  /** Rejects to end the job at once on the real clock, with its error (a bus that lost messages). */
  stop?: Promise<never>;
}

export async function runJob(cfg: JobConfig, opts: RunOptions): Promise<JobResult> {
  const wallStart = performance.now();
  const { policy, shape } = planJob(cfg);
  const durations = durationModelFor(cfg, shape);
  if (cfg.train) await loadTrainingBackend(cfg.train);
  const clock: Clock = opts.clock === 'virtual' ? new VirtualClock() : new RealClock();
  const runtime = new ActorRuntime(clock, cfg.job);
  const t0 = clock.now();
  const bus = opts.bus ?? new LocalBus();
  // Over NATS, this run's id on every message, as a distributed run's: stages a killed
  // launcher left behind on the same job name cannot feed it. The in-process bus is this
  // run's alone.
  const launch = bus.kind === 'local' ? undefined : newLaunchId();
  const events: BatonEvent[] = [];
  const extra = opts.sinks ?? [];
  const sink: EventSink =
    extra.length === 0
      ? (e) => events.push(e)
      : (e) => {
          events.push(e);
          for (const s of extra) s(e);
        };
  const stages: ActorRef<StageActorMsg>[] = [];
  const subs: Subscription[] = [];
  const computes: StageCompute[] = [];
  for (let s = 0; s < shape.stages; s++) {
    const w = wireStage({
      runtime,
      bus,
      cfg,
      plan: { policy, shape },
      durations,
      stage: s,
      sink,
      computeFor: opts.computeFor,
      launch,
    });
    subs.push(...w.subscriptions);
    stages.push(w.stage);
    computes.push(w.compute);
  }
  let records: IterationRecord[] | null = null;
  let fail: (e: Error) => void = () => {};
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  runtime.onFailure = (f) => fail(new JobError(`actor ${f.actor} failed: ${f.error.message}`, { cause: f.error }));
  const coordinator = coordinate({
    runtime,
    bus,
    job: cfg.job,
    stages: shape.stages,
    microbatches: shape.microbatches,
    iterations: cfg.warmupIterations + cfg.iterations,
    firstIteration: cfg.firstIteration,
    onIteration: opts.onIteration,
    launch,
    reportFields: (st) => requiredReportFields(cfg, st),
  });
  const finished = coordinator.done.then((r) => {
    records = r;
  });
  subs.push({ unsubscribe: coordinator.unsubscribe });

  const statuses = () =>
    Promise.all(stages.map((a) => runtime.ask<StageActorMsg, StageStatus>(a, (reply) => ({ type: 'status', reply }))));
  try {
    coordinator.begin();
    if (clock instanceof VirtualClock) {
      const done = await clock.run(() => records !== null || runtime.failures.length > 0);
      if (runtime.failures.length > 0) throw await failed.catch((e: Error) => e);
      if (!done) throw new DeadlockError(await statuses(), events.slice(-40), clock.now() - t0);
    } else {
      await waitWithWatchdog(
        Promise.race([finished, failed, ...(opts.stop ? [opts.stop] : [])]),
        () => events.length,
        cfg.stallTimeoutMs,
        async () => new DeadlockError(await statuses(), events.slice(-40), clock.now() - t0),
      );
    }
    if (runtime.failures.length > 0)
      throw new JobError(
        `actor failures: ${runtime.failures
          .slice(0, 5)
          .map((f) => `${f.actor}: ${f.error.message}`)
          .join('; ')}`,
        { cause: runtime.failures[0].error },
      );
    return buildResult({
      cfg,
      shape,
      policy,
      records: records as unknown as IterationRecord[],
      events,
      clock: clock.kind,
      transport: bus.kind,
      wallStart,
      validate: opts.validate !== false,
      coordinatorRejects: coordinator.rejects,
    });
  } finally {
    for (const s of subs) s.unsubscribe();
    runtime.shutdown();
    for (const c of computes) c.dispose?.();
    if (!opts.bus) await bus.close();
  }
}

export async function waitWithWatchdog(
  done: Promise<void>,
  progress: () => number,
  stallMs: number,
  onStall: () => Promise<Error>,
): Promise<void> {
  let last = progress();
  let lastChange = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setInterval(
      () => {
        const p = progress();
        if (p !== last) {
          last = p;
          lastChange = performance.now();
        } else if (performance.now() - lastChange > stallMs) {
          clearInterval(timer);
          onStall().then(reject, reject);
        }
      },
      Math.min(1000, Math.max(50, stallMs / 10)),
    );
  });
  try {
    await Promise.race([done, stalled]);
  } finally {
    clearInterval(timer);
  }
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
    clock: r.clock,
    iterations: r.iterations.map((i) => ({
      iteration: i.iteration,
      makespan_ms: i.makespan_ms,
      lower_bound_ms: i.lower_bound_ms,
      efficiency: i.efficiency,
      bubble_fraction: i.bubble_fraction,
    })),
    makespan_ms: makespan,
    lower_bound_ms: lowerBound,
    // A run of zero-length tasks takes no time and wastes none.
    efficiency: makespan > 0 ? lowerBound / makespan : 1,
    bubble_fraction: mean(r.iterations.map((i) => i.bubble_fraction)),
    peak_inflight: r.totals.peakInflight,
    tasks: r.totals.tasks,
    messages: r.totals.messages,
    bytes: r.totals.bytes,
    rejected: r.totals.rejected,
    wall_ms: r.wallMs,
    mode: r.config.mode,
    ...(r.config.mode === 'async' ? asyncStats(r) : {}),
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
  /** False when stages ran in different processes (different clocks). */
  sharedClock?: boolean;
  /** Messages the coordinator refused (not a report of this job's current iteration): counted as rejected. */
  coordinatorRejects?: RejectTally;
  /** Other messages the launcher refused (trace batches of another launch): counted as rejected. */
  launcherRejects?: RejectTally;
}

const MAX_REJECTS_KEPT = 20;

/** Validate a finished run and compute its statistics (shared by local and distributed runs). */
export function buildResult(p: ResultParts): JobResult {
  const measured = measuredDurations(p.events, p.shape, p.sharedClock ?? true) as unknown as DurationModel;
  if (p.validate) {
    const problems = validateRun(p.events, p.shape, p.cfg.warmupIterations + p.cfg.iterations, {
      sharedClock: p.sharedClock ?? true,
      firstIteration: p.cfg.firstIteration,
    });
    if (problems.length > 0) throw new ValidationError(problems);
  }
  const measuredRecords = p.records.slice(p.cfg.warmupIterations);
  const byIteration = eventsByIteration(p.events);
  const iterations = measuredRecords.map((r) =>
    iterationStats(
      r,
      byIteration.get(r.iteration) ?? [],
      p.shape.stages,
      lowerBound(p.shape, r.iteration, measured).bound,
    ),
  );
  const measuredIterations = new Set(measuredRecords.map((r) => r.iteration));
  const t = totals(p.events, p.shape.stages, (it) => measuredIterations.has(it));
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
  };
}
