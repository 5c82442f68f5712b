// One job in one process: every stage's actors (stage, sender, receiver), the
// coordinator and a bus, on the real or the virtual clock. `baton sim` is this with the
// virtual clock and the in-process bus; the same wiring runs over NATS.

import { HintPolicy } from '../policies/hint';
import { chooseWithBackpressure, inBackpressure } from '../policies/backpressure';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, validateShape } from '../policies/task';
import { makeDurationModel, DurationModel } from '../models/durations';
import { loadProfile } from '../models/profile';
import { lowerBound } from '../models/lower-bound';
import { Bus } from '../transport/bus';
import { LocalBus } from '../transport/local-bus';
import { checkJobName, subject } from '../transport/subjects';
import { Clock, RealClock, VirtualClock } from './clock';
import { EmulatedCompute, StageCompute } from './compute';
import { IterationRecord, spawnCoordinator } from './coordinator';
import { DeadlockError } from './deadlock';
import { BatonEvent, EventSink } from './events';
import { JobConfig } from './config';
import { spawnReceiver } from './receiver';
import { ActorRuntime, ActorRef } from './runtime';
import { spawnSender } from './sender';
import { StageActorMsg, spawnStage } from './stage';
import { Arbiter, StageStatus } from './stage-logic';
import { IterationStats, StageTotals, iterationStats, mean, totals } from './stats';
import { ValidationError, validateRun } from './validate';

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
}

export class JobError extends Error {
  override name = 'JobError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export function makeArbiter(policy: HintPolicy, limit: number): Arbiter {
  return (ready, memo, ctx) => ({
    task: chooseWithBackpressure(policy, memo, ready, ctx, limit),
    backpressure: inBackpressure(policy, ctx, limit),
  });
}

/** Resolve the policy and the pipeline shape of a config, refusing unsupported shapes. */
export function planJob(cfg: JobConfig): { policy: HintPolicy; shape: PipelineShape } {
  checkJobName(cfg.job);
  const policy = resolvePolicy(cfg.policy);
  const shape: PipelineShape = { stages: cfg.stages, chunks: cfg.chunks, microbatches: cfg.microbatches, splitBackward: policy.splitBackward };
  validateShape(shape);
  policy.check(shape);
  if (!Number.isInteger(cfg.iterations) || cfg.iterations < 1) throw new JobError(`iterations must be a positive integer, got ${cfg.iterations}`);
  if (!Number.isInteger(cfg.bufferLimit) || cfg.bufferLimit < 1) throw new JobError(`buffer limit must be a positive integer, got ${cfg.bufferLimit}`);
  return { policy, shape };
}

export function durationModelFor(cfg: JobConfig, shape: PipelineShape): DurationModel {
  return makeDurationModel({ profile: loadProfile(cfg.profile), shape, jitter: cfg.jitter, jitterScale: cfg.jitterScale, seed: cfg.seed });
}

export interface RunOptions {
  clock: 'virtual' | 'real';
  /** Defaults to a new in-process bus. */
  bus?: Bus;
  /** Extra event consumers (trace publishers, live printers). */
  sinks?: EventSink[];
  /** Replace emulated compute (real compute, issue 4). */
  computeFor?: (stage: number, clock: Clock) => StageCompute;
  /** Skip validation (never for tests; for huge benchmark runs the validation is timed separately). */
  validate?: boolean;
}

export async function runJob(cfg: JobConfig, opts: RunOptions): Promise<JobResult> {
  const wallStart = performance.now();
  const { policy, shape } = planJob(cfg);
  const durations = durationModelFor(cfg, shape);
  const clock: Clock = opts.clock === 'virtual' ? new VirtualClock() : new RealClock();
  const runtime = new ActorRuntime(clock, cfg.job);
  const bus = opts.bus ?? new LocalBus();
  const events: BatonEvent[] = [];
  const extra = opts.sinks ?? [];
  const sink: EventSink = extra.length === 0 ? (e) => events.push(e) : (e) => {
    events.push(e);
    for (const s of extra) s(e);
  };
  const arbiter = makeArbiter(policy, cfg.bufferLimit);
  const stages: ActorRef<StageActorMsg>[] = [];
  const subs = [];
  for (let s = 0; s < shape.stages; s++) {
    const sender = spawnSender({ runtime, bus, job: cfg.job, stage: s, comm: durations, sink });
    const compute = opts.computeFor ? opts.computeFor(s, clock) : new EmulatedCompute(clock, s, durations);
    const stage = spawnStage({ stage: s, shape, policy, arbiter }, { runtime, compute, sender, sink });
    const receiver = spawnReceiver({ runtime, job: cfg.job, stage: s, target: stage, sink });
    subs.push(bus.subscribe(`baton.${cfg.job}.*.${s}`, (subj, data) => runtime.send(receiver, { type: 'bytes', subject: subj, data })));
    stages.push(stage);
  }
  let records: IterationRecord[] | null = null;
  const coordinatorRejects: string[] = [];
  let finish: () => void = () => {};
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const coordinator = spawnCoordinator({
    runtime, bus, job: cfg.job, stages: shape.stages, microbatches: shape.microbatches, iterations: cfg.iterations,
    onDone: (r) => {
      records = r;
      finish();
    },
    onReject: (d) => coordinatorRejects.push(d),
  });
  subs.push(bus.subscribe(subject(cfg.job, 'report'), (subj, data) => runtime.send(coordinator, { type: 'bytes', subject: subj, data })));

  const statuses = () => Promise.all(stages.map((a) => runtime.ask<StageActorMsg, StageStatus>(a, (reply) => ({ type: 'status', reply }))));
  try {
    runtime.send(coordinator, { type: 'begin' });
    if (clock instanceof VirtualClock) {
      const done = await clock.run(() => records !== null);
      if (!done) throw new DeadlockError(await statuses(), events.slice(-40), clock.now());
    } else {
      await waitWithWatchdog(finished, () => events.length, cfg.stallTimeoutMs, async () =>
        new DeadlockError(await statuses(), events.slice(-40), clock.now()));
    }
    if (runtime.failures.length > 0)
      throw new JobError(`actor failures: ${runtime.failures.slice(0, 5).map((f) => `${f.actor}: ${f.error.message}`).join('; ')}`, { cause: runtime.failures[0].error });
    if (coordinatorRejects.length > 0) throw new JobError(`coordinator rejected messages: ${coordinatorRejects.slice(0, 5).join('; ')}`);
    if (opts.validate !== false) {
      const problems = validateRun(events, shape, cfg.iterations, { crossStageSlackMs: clock.kind === 'virtual' ? 0 : 2 });
      if (problems.length > 0) throw new ValidationError(problems);
    }
    const recs = records as unknown as IterationRecord[];
    const iterations = recs.map((r) => iterationStats(r, events, shape.stages, lowerBound(shape, r.iteration, durations).bound));
    return {
      config: cfg, shape, policy, clock: clock.kind, transport: bus.kind, records: recs, iterations,
      totals: totals(events, shape.stages), events, wallMs: performance.now() - wallStart,
    };
  } finally {
    for (const s of subs) s.unsubscribe();
    runtime.shutdown();
    if (!opts.bus) await bus.close();
  }
}

async function waitWithWatchdog(done: Promise<void>, progress: () => number, stallMs: number, onStall: () => Promise<Error>): Promise<void> {
  let last = progress();
  let lastChange = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setInterval(() => {
      const p = progress();
      if (p !== last) {
        last = p;
        lastChange = performance.now();
      } else if (performance.now() - lastChange > stallMs) {
        clearInterval(timer);
        onStall().then(reject, reject);
      }
    }, Math.min(1000, Math.max(50, stallMs / 10)));
  });
  try {
    await Promise.race([done, stalled]);
  } finally {
    clearInterval(timer);
  }
}

export function summarize(r: JobResult) {
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
    clock: r.clock,
    iterations: r.iterations.map((i) => ({
      iteration: i.iteration, makespan_ms: i.makespan_ms, lower_bound_ms: i.lower_bound_ms,
      efficiency: i.efficiency, bubble_fraction: i.bubble_fraction,
    })),
    makespan_ms: mean(r.iterations.map((i) => i.makespan_ms)),
    lower_bound_ms: mean(r.iterations.map((i) => i.lower_bound_ms)),
    efficiency: mean(r.iterations.map((i) => i.lower_bound_ms)) / mean(r.iterations.map((i) => i.makespan_ms)),
    bubble_fraction: mean(r.iterations.map((i) => i.bubble_fraction)),
    peak_inflight: r.totals.peakInflight,
    tasks: r.totals.tasks,
    messages: r.totals.messages,
    bytes: r.totals.bytes,
    rejected: r.totals.rejected,
    wall_ms: r.wallMs,
  };
}
