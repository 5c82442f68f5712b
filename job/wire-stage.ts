// Wiring of one pipeline stage: its sender, stage and receiver actors, and the bus
// subscription that feeds the receiver. The same wiring serves a single-process job
// (job/run-local.ts) and a node agent hosting stages for a distributed one (actors/node-agent.ts).

import { HintPolicy } from '../policies/hint';
import { arbiterFor } from '../policies/arbiter';
import { ackingSink, stageSwapOrders } from '../actors/swap-receive';
import { countingSink, newTotals, publishStats } from '../actors/stats-publisher';
import { SWAP_DEFAULTS } from './defaults';
import { resendWiring, wireResends } from './wire-resend';
import { inflightBound, stageBufferLimit } from '../policies/backpressure';
import { PipelineShape } from '../policies/task';
import { DurationModel } from '../models/durations';
import { Bus, Subscription } from '../transport/bus';
import { SubjectKind } from '../transport/subjects';
import { Clock } from '../base/clock';
import { AsyncEmulatedCompute, TimedCompute } from '../compute/emulated';
import { CollectiveEmulatedCompute } from '../compute/tp-emulated';
import { ParamStoreWiring, StoreMsg, canonicalConsistency, spawnParamStore } from '../actors/param-store';
import type { AsyncSnapshot } from '../actors/param-store-snapshot';
import { snapshotSender } from './snapshot-send';
import type { StageRecovery } from './stage-recovery';
import { syncTrainingCompute, tfjsModules } from './wire-training';
import { EmulatedCompute, StageCompute } from '../stage/compute';
import { EventSink } from '../stage/events';
import { JobConfig, partitionWeights } from './config';
import { ReceiverWiring, spawnReceiver } from '../actors/receiver';
import { ActorRuntime, ActorRef } from '../actors/runtime';
import { SenderMsg, spawnSender } from '../actors/sender';
import { StageActorMsg, spawnStage } from '../actors/stage';
import { Lane, isWide, laneName, laneSubject } from '../transport/lanes';
import { laneCollectives, laneSink, spawnLaneTp } from './wire-lane';
import { LaneCollectives } from '../compute/tp-emulated';

export { loadTrainingBackend } from './wire-training';
export { checkJob, durationModelFor, laneDurationsFor, planJob } from './job-plan';

export { JobConfigError, JobError, NodeInputError } from './job-errors';
import { JobConfigError } from './job-errors';

/** The stage's compute; `onStore` is told the parameter store of an asynchronous stage, which `sink` hears swaps from. */
function computeFor(
  o: StageWiringOptions,
  collectives: LaneCollectives,
  sink: EventSink,
  onStore: (ref: ActorRef<StoreMsg>) => void,
): StageCompute {
  const { runtime, cfg, plan, durations, stage: s } = o;
  // Before any tensor exists: a config from the network must not make this process allocate without bound.
  if (cfg.train) {
    const { checkTrainSize, corpusFor, modelSpecFor } = tfjsModules().config;
    checkTrainSize(cfg.train, modelSpecFor(cfg.train, corpusFor(cfg.train).vocabSize));
  }
  const clock = runtime.clock;
  let real: StageCompute | null = null;
  if (cfg.mode === 'async') {
    const tfjs = cfg.train ? tfjsModules().async : null;
    const module = tfjs && cfg.train ? tfjs.asyncStageModule(s, plan.shape, cfg.train, partitionWeights(cfg)) : null;
    const init = tfjs && module ? tfjs.initialParams(module) : null;
    const inflight = inflightBound(plan.policy, plan.shape, s, stageBufferLimit(cfg.bufferLimit, s, plan.shape.stages));
    // PipeMare's and prediction's delay is the nominal one of asynchronous 1F1B, P - 1 - s,
    // unless the stage cannot have that many in flight.
    const delay = Math.min(inflight, plan.shape.stages - s) - 1;
    const control = tfjs && cfg.train && canonicalConsistency(cfg.async.consistency) === 'projection-control';
    const controlTaus = control ? tfjs.controlTaus(cfg.train!, cfg.async.controlStages) : undefined;
    const recovery = asyncRecoveryOf(o);
    const store = spawnParamStore({
      runtime,
      stage: s,
      inflightBound: inflight,
      delay,
      settings: cfg.async,
      params: init?.params ?? null,
      infos: init?.infos ?? [],
      controlTaus,
      ...recovery,
      onConsistencySwap: (swap, from, to, updates) =>
        sink({
          type: 'policy-swap',
          t: clock.now(),
          stage: s,
          iteration: cfg.firstIteration,
          swap,
          what: 'consistency',
          from,
          to,
          tasks: updates,
        }),
    });
    onStore(store);
    if (!tfjs || !module || !cfg.train) return new AsyncEmulatedCompute(runtime, s, durations, store);
    const { backward, firstMicrobatch } = cfg.async;
    real = new tfjs.AsyncTrainingCompute(runtime, s, plan.shape, cfg.train, module, store, {
      backwardMode: backward,
      firstMicrobatch,
      keepsSnapshots: recovery.snapshots !== undefined,
    });
  } else if (cfg.train) {
    real = syncTrainingCompute({
      runtime,
      cfg,
      shape: plan.shape,
      stage: s,
      collectives,
      lane: o.lane,
      recovery: o.recovery,
    });
  }
  if (!real)
    return collectives.tp || collectives.dp
      ? new CollectiveEmulatedCompute(clock, s, durations, collectives, (err) => runtime.fail(`stage-${s}`, err))
      : new EmulatedCompute(clock, s, durations);
  // On the virtual clock real compute holds its stage for the profile's duration.
  return clock.kind === 'virtual' ? new TimedCompute(real, clock, s, durations) : real;
}

/** A recoverable asynchronous stage's snapshots (sent every stateEvery updates, the job's --snapshot-every) and the one it resumes from. */
function asyncRecoveryOf(o: StageWiringOptions): Pick<ParamStoreWiring, 'snapshots' | 'resume'> {
  const r = o.recovery;
  if (!r || r.stateEvery === 0 || !o.cfg.train) return {};
  const send = snapshotSender(o.bus, o.cfg.job, o.stage, o.launch);
  return {
    snapshots: { every: r.stateEvery, send },
    ...(r.resume ? { resume: r.resume as AsyncSnapshot } : {}),
  };
}

export interface WiredStage {
  readonly stage: ActorRef<StageActorMsg>;
  readonly subscriptions: Subscription[];
  /** Owned by the wiring's caller: dispose it when the job ends (tensors, variables). */
  readonly compute: StageCompute;
}

/** The subject kinds a stage's receiver listens to (its trace subject is for watchers). */
export const STAGE_INBOX_KINDS: readonly SubjectKind[] = ['control', 'data', 'activation', 'gradient'];

export interface StageWiringOptions {
  runtime: ActorRuntime;
  bus: Bus;
  cfg: JobConfig;
  plan: { policy: HintPolicy; shape: PipelineShape };
  durations: DurationModel;
  stage: number;
  sink: EventSink;
  /** Replace the compute (a wide job's gets its lane's collectives: the AllReduce of its TP group and of its replicas). */
  computeFor?: (stage: number, clock: Clock, collectives?: LaneCollectives, lane?: Lane) => StageCompute;
  /** The stage actor's rank and replica in a job with T > 1 or D > 1 (durations are then the lane's). */
  lane?: Lane;
  /** The launch id of a distributed job: stamped on the stage's messages and required of those it takes. */
  launch?: string;
  /** Module paths a policy swap may load (named at launch); built-in names need none. */
  swapModules?: readonly string[];
  /** Recovery (job/recovery.ts): the stage's state to start from (instead of a checkpoint), and whether
   * every flush sends the stage's state to the launcher. */
  recovery?: StageRecovery;
}

/** Refuses a stage whose messages the bus could not carry, naming the message, its size and the limit. */
export function checkMessageSizes(stage: number, compute: StageCompute, bus: Bus): void {
  for (const m of compute.largestMessages?.() ?? []) {
    if (m.bytes <= bus.maxMessageBytes) continue;
    // Over NATS a message above max_payload goes in chunks; the codec's limit bounds the whole.
    throw new JobConfigError(
      `stage ${stage}: ${m.what} would be about ${m.bytes} bytes, over the codec's limit of ${bus.maxMessageBytes} bytes: use a smaller model or microbatch, or more stages`,
    );
  }
}

/** The stage's receiver, fed from the bus on the stage's inbox subjects, and its resends when
 * they are on; their subscriptions go to `subs`. */
function wireReceiver(
  o: StageWiringOptions,
  w: {
    sender: ActorRef<SenderMsg>;
    stage: ActorRef<StageActorMsg>;
    sink: EventSink;
    swapOrder: ReceiverWiring['swapOrder'];
    resends: ReturnType<typeof resendWiring>;
  },
  subs: Subscription[],
): void {
  const { runtime, bus, cfg, stage: s, lane } = o;
  const receiver = spawnReceiver({
    runtime,
    job: cfg.job,
    stage: s,
    target: w.stage,
    sink: w.sink,
    launch: o.launch,
    lane,
    swapOrder: w.swapOrder,
    ...w.resends.receiver,
  });
  if (w.resends.on) subs.push(wireResends(o, w.sender, w.stage, receiver, w.sink));
  for (const kind of STAGE_INBOX_KINDS)
    subs.push(
      bus.subscribe(laneSubject(cfg.job, kind, s, lane), (subj, data) =>
        runtime.send(receiver, { type: 'bytes', subject: subj, data }),
      ),
    );
}

export function wireStage(o: StageWiringOptions): WiredStage {
  const { runtime, bus, cfg, plan, durations, stage: s, lane } = o;
  const wide = isWide(lane);
  // Stats for baton inspect: a plain (one rank, one replica) stage over NATS on the real clock.
  const watched = bus.kind === 'nats' && runtime.clock.kind === 'real' && !wide;
  const totals = newTotals();
  const sink = ackingSink(
    watched ? countingSink(laneSink(o.sink, lane), totals) : laneSink(o.sink, lane),
    bus,
    cfg.job,
    o.launch,
  );
  const subscriptions: Subscription[] = [];
  const collectives = laneCollectives({ ...o, sink }, subscriptions);
  let store: ActorRef<StoreMsg> | null = null;
  const compute = o.computeFor
    ? o.computeFor(s, runtime.clock, collectives, lane)
    : computeFor(o, collectives, sink, (ref) => (store = ref));
  try {
    checkMessageSizes(s, compute, bus);
  } catch (err) {
    compute.dispose?.();
    for (const sub of subscriptions) sub.unsubscribe();
    throw err;
  }
  const launch = o.launch;
  const r = resendWiring(o);
  const sender = spawnSender({ runtime, job: cfg.job, stage: s, comm: durations, sink, launch, lane, ...r.sender });
  const limit = stageBufferLimit(cfg.bufferLimit, s, plan.shape.stages);
  const arbiter = arbiterFor(plan.policy, limit);
  const tpRanks = lane && lane.ranks > 1 ? { ranks: lane.ranks, rank: lane.rank } : undefined;
  // The group member needs the stage's address and the stage its member's: the member is
  // spawned with a forwarding target set once the stage exists.
  const forward: { to: ActorRef<StageActorMsg> | null } = { to: null };
  const tp = tpRanks ? spawnLaneTp({ ...o, sink }, forward, subscriptions) : undefined;
  const stage = spawnStage(
    {
      stage: s,
      shape: plan.shape,
      arbiter,
      firstIteration: cfg.firstIteration,
      settleBeforeArbitration: runtime.clock.kind === 'virtual',
      tp: tpRanks,
    },
    {
      runtime,
      compute,
      sender,
      sink,
      outboundWritten: () => bus.written(),
      tp,
      name: wide ? `stage-${laneName(s, lane)}` : undefined,
    },
  );
  forward.to = stage;
  const swapOrder = stageSwapOrders({
    runtime,
    mode: cfg.mode,
    wide,
    target: { stage: s, shape: plan.shape, limit, allowedModules: o.swapModules ?? [] },
    store: () => store,
  });
  wireReceiver(o, { sender, stage, sink, swapOrder, resends: r }, subscriptions);
  if (watched) {
    const everyMs = SWAP_DEFAULTS.statsEveryMs;
    subscriptions.push(
      publishStats({ runtime, bus, job: cfg.job, stage: s, limit, launch, everyMs, totals, target: stage }),
    );
  }
  return { stage, subscriptions, compute };
}
