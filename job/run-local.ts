// One job in one process: every stage's actors (stage, sender, receiver), the
// coordinator and a bus, on the real or the virtual clock. `baton sim` is this with the
// virtual clock and the in-process bus; the same wiring runs over NATS.

import { Bus, Subscription } from '../transport/bus';
import { LocalBus } from '../transport/local-bus';
import { newLaunchId } from '../transport/envelope';
import { Clock, RealClock, VirtualClock } from '../base/clock';
import { StageCompute } from '../stage/compute';
import { IterationRecord } from '../actors/coordinator';
import { DeadlockError } from '../checks/deadlock';
import { BatonEvent, EventSink, endsWork } from '../stage/events';
import { failureSignal } from '../base/failure-signal';
import { JobConfig } from './config';
import { ActorRuntime, ActorRef } from '../actors/runtime';
import { StageActorMsg } from '../actors/stage';
import { StageStatus } from '../stage/stage-state';
import {
  JobError,
  StageWiringOptions,
  durationModelFor,
  laneDurationsFor,
  loadTrainingBackend,
  planJob,
  wireStage,
} from './wire-stage';
import { lanesOf } from '../transport/lanes';

export { JobError, planJob } from './wire-stage';
export { JobResult, asyncStats, buildResult, summarize } from './run-result';
import { JobResult, buildResult } from './run-result';
import { SwapOptions, swapModulesOf } from './policy-control';
import { coordinatorOf, policyControlOf, sealRejectTally, stageStatuses, throwActorFailures } from './run-local-wiring';
import { checkSwapSchedule } from './swap-records';

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
  /** Scripted swaps, the modules swaps may load, a handle to swap from this process (job/policy-control.ts). */
  swaps?: SwapOptions;
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
  const sealRejects = sealRejectTally(bus);
  checkSwapSchedule(cfg, policy, shape, opts.swaps);
  const swapModules = swapModulesOf(opts.swaps);
  const { stages, subs, computes } = wireStages(
    { runtime, bus, cfg, plan: { policy, shape }, durations, computeFor: opts.computeFor, launch, swapModules },
    recordingSink(events, opts.sinks ?? []),
  );
  let ended = 0;
  let begun = false;
  const control = policyControlOf(runtime, bus, cfg, shape, policy, launch, opts.swaps, () => ({ ended, begun }));
  subs.push(control.subscription);
  let records: IterationRecord[] | null = null;
  const { failed, fail } = failureSignal();
  runtime.onFailure = (f) => fail(new JobError(`actor ${f.actor} failed: ${f.error.message}`, { cause: f.error }));
  const coordinator = coordinatorOf(runtime, bus, cfg, shape, launch, (r) => {
    ended++;
    opts.onIteration?.(r);
  });
  const finished = coordinator.done.then((r) => {
    records = r;
  });
  subs.push({ unsubscribe: coordinator.unsubscribe });

  const statuses = () => stageStatuses(runtime, stages, lanesOf(cfg.tp, cfg.dp), shape.stages);
  try {
    begun = true;
    coordinator.begin();
    await untilDone(
      clock,
      runtime,
      cfg,
      { finished, failed, stop: opts.stop, statuses, events, t0 },
      () => records !== null,
    );
    throwActorFailures(runtime);
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
      launcherRejects: sealRejects,
      swapLog: control.actor.log,
    });
  } finally {
    for (const s of subs) s.unsubscribe();
    runtime.shutdown();
    for (const c of computes) c.dispose?.();
    if (!opts.bus) await bus.close();
  }
}

/** A sink that keeps every event in `events` and passes it on to `extra`. */
function recordingSink(events: BatonEvent[], extra: readonly EventSink[]): EventSink {
  return extra.length === 0
    ? (e) => events.push(e)
    : (e) => {
        events.push(e);
        for (const s of extra) s(e);
      };
}

/** Every stage actor of the job wired in this process: P stages of every lane (T ranks × D replicas). */
function wireStages(
  w: Omit<StageWiringOptions, 'stage' | 'sink'>,
  sink: EventSink,
): { stages: ActorRef<StageActorMsg>[]; subs: Subscription[]; computes: StageCompute[] } {
  const stages: ActorRef<StageActorMsg>[] = [];
  const subs: Subscription[] = [];
  const computes: StageCompute[] = [];
  const { cfg } = w;
  const lanes = lanesOf(cfg.tp, cfg.dp);
  for (const lane of lanes) {
    const wide = lanes.length > 1;
    const durations = wide ? laneDurationsFor(cfg, w.plan.shape, lane) : w.durations;
    for (let s = 0; s < w.plan.shape.stages; s++) {
      const wired = wireStage({ ...w, durations, stage: s, sink, ...(wide ? { lane } : {}) });
      subs.push(...wired.subscriptions);
      stages.push(wired.stage);
      computes.push(wired.compute);
    }
  }
  return { stages, subs, computes };
}

/** Until the coordinator has every iteration: the virtual clock runs dry or the real one
 * stalls (a DeadlockError with the stages' statuses), or an actor fails. */
async function untilDone(
  clock: Clock,
  runtime: ActorRuntime,
  cfg: JobConfig,
  w: {
    finished: Promise<void>;
    failed: Promise<never>;
    stop?: Promise<never>;
    statuses: () => Promise<StageStatus[]>;
    events: BatonEvent[];
    t0: number;
  },
  recorded: () => boolean,
): Promise<void> {
  if (clock instanceof VirtualClock) {
    const done = await clock.run(() => recorded() || runtime.failures.length > 0);
    if (runtime.failures.length > 0) throw await w.failed.catch((e: Error) => e);
    if (!done) throw new DeadlockError(await w.statuses(), w.events.slice(-40), clock.now() - w.t0);
  } else {
    // Work done (endsWork), counted as the events come; a task that holds this process's
    // loop is progress once it ends (the watchdog does not blame a held thread).
    let seen = 0,
      work = 0;
    const workDone = () => {
      for (; seen < w.events.length; seen++) if (endsWork(w.events[seen])) work++;
      return work;
    };
    await waitWithWatchdog(
      Promise.race([w.finished, w.failed, ...(w.stop ? [w.stop] : [])]),
      workDone,
      cfg.stallTimeoutMs,
      async () => new DeadlockError(await w.statuses(), w.events.slice(-40), clock.now() - w.t0),
    );
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
  let lastLook = lastChange;
  let timer: NodeJS.Timeout | undefined;
  const every = Math.min(1000, Math.max(50, stallMs / 10));
  const stalled = new Promise<never>((_, reject) => {
    timer = setInterval(() => {
      const p = progress();
      const now = performance.now();
      // This thread was held (a blocking task, a checkpoint write): what arrived meanwhile
      // is not read yet, so the wait starts again rather than blame the peers.
      const held = now - lastLook > Math.max(4 * every, stallMs / 2);
      lastLook = now;
      if (p !== last || held) {
        last = p;
        lastChange = now;
      } else if (now - lastChange > stallMs) {
        clearInterval(timer);
        onStall().then(reject, reject);
      }
    }, every);
  });
  try {
    await Promise.race([done, stalled]);
  } finally {
    clearInterval(timer);
  }
}
