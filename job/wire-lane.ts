// What a stage actor of a wide job (T > 1 ranks or D > 1 replicas) gets besides a plain
// stage's wiring: the shape checks of such a job, events tagged with rank and replica, the
// rank's member of its tensor-parallel group (actors/tp-group.ts), and the AllReduce of its
// group and of its replicas over the bus (actors/bus-all-reduce.ts), with the profile's
// collective costs when compute is emulated.

import { EXIT_INPUT, BatonError } from '../base/errors';
import { spawnBusAllReduce } from '../actors/bus-all-reduce';
import type { Floats } from '../models/all-reduce';
import { spawnTpGroupMember, TpGroupMsg } from '../actors/tp-group';
import { ActorRef } from '../actors/runtime';
import { StageActorMsg } from '../actors/stage';
import { allReduceMs, coordinationMs } from '../models/lane-durations';
import { Subscription } from '../transport/bus';
import { Lane, isWide, laneName, laneSubject } from '../transport/lanes';
import { EventSink } from '../stage/events';
import { LaneCollectives } from '../compute/tp-emulated';
import { checkTrainTensorParallel } from '../models/tp/tp-shape';
import { JobConfig } from './config';
import type { StageWiringOptions } from './wire-stage';

/** The most ranks per stage and replicas per job Baton runs (each is a stage actor per stage). */
export const MAX_TP = 64;
export const MAX_DP = 64;

/** A tensor-parallel or data-parallel shape that cannot run: bad input. */
export class LaneShapeError extends BatonError {
  override name = 'LaneShapeError';
  override readonly exitStatus = EXIT_INPUT;
}

/** Refuse --tp / --dp values, and modes, a wide job cannot run. */
export function checkLanes(
  cfg: Pick<JobConfig, 'tp' | 'dp' | 'mode' | 'stages' | 'train' | 'partition' | 'stageSpeeds'>,
): void {
  const tp = cfg.tp ?? 1;
  const dp = cfg.dp ?? 1;
  if (!Number.isInteger(tp) || tp < 1 || tp > MAX_TP)
    throw new LaneShapeError(`tensor-parallel ranks (--tp) must be an integer from 1 to ${MAX_TP}, got ${tp}`);
  if (!Number.isInteger(dp) || dp < 1 || dp > MAX_DP)
    throw new LaneShapeError(`data-parallel replicas (--dp) must be an integer from 1 to ${MAX_DP}, got ${dp}`);
  if (cfg.mode === 'async' && dp > 1)
    throw new LaneShapeError(
      `--dp ${dp} with --mode async: data parallelism all-reduces gradients at the flush, and asynchronous mode has none; use --mode sync or --dp 1`,
    );
  if (cfg.train && tp > 1) checkTrainTensorParallel(cfg.train, tp);
  if (cfg.train && tp > 1 && cfg.partition === 'speed' && cfg.stageSpeeds)
    throw new LaneShapeError(
      `--tp ${tp} with --partition speed: a rank's share of a stage is cut where the balanced partition cuts; use --partition uniform or --tp 1`,
    );
  // A checkpoint holds whole stages: a TP rank's slices and a replica's copy would need gathering first.
  if (cfg.train && (tp > 1 || dp > 1) && (cfg.train.checkpoint !== null || cfg.train.startIteration > 0))
    throw new LaneShapeError(
      `--tp ${tp} --dp ${dp} with --checkpoint or --resume: checkpoints hold whole stages of one replica, and a wide job's are not gathered; train with --tp 1 --dp 1 to checkpoint`,
    );
  if (cfg.mode === 'async' && tp > 1)
    throw new LaneShapeError(
      `--tp ${tp} with --mode async: a parameter store per rank of a split layer is not built; use --mode sync or --tp 1`,
    );
}

/** Events of a wide job's stage actor carry its rank and replica. */
export function laneSink(sink: EventSink, lane: Lane | undefined): EventSink {
  if (!isWide(lane)) return sink;
  const where = { rank: lane.rank, replica: lane.replica };
  return (e) => sink({ ...e, ...where });
}

/** The rank's AllReduce with its TP group and with its replicas (none for a group of one); their subscriptions go to `subs`. */
export function laneCollectives(o: StageWiringOptions, subs: Subscription[]): LaneCollectives {
  const { lane } = o;
  if (!isWide(lane)) return {};
  const out: { -readonly [K in keyof LaneCollectives]: LaneCollectives[K] } = {};
  if (lane.ranks > 1) {
    const r = spawnLaneReduce<Float32Array>(o, lane, 'tp', subs);
    out.tp = { allReduce: r.allReduce, reduce: r.reduce, rank: lane.rank, ranks: lane.ranks };
  }
  if (lane.replicas > 1) {
    const r = spawnLaneReduce<Float64Array>(o, lane, 'dp', subs);
    out.dp = { allReduce: r.allReduce, reduce: r.reduce, replica: lane.replica, replicas: lane.replicas };
  }
  return out;
}

/**
 * The rank's AllReduce across its TP group's ranks (tp) or across its stage's replicas (dp).
 * Emulated, a part costs the profile's collective time; a TP part stands for an activation's
 * bytes, a replica's counts its own.
 */
function spawnLaneReduce<A extends Floats>(o: StageWiringOptions, lane: Lane, axis: 'tp' | 'dp', subs: Subscription[]) {
  const { runtime, bus, cfg, durations, stage } = o;
  const profile = durations.profile;
  const members = axis === 'tp' ? lane.ranks : lane.replicas;
  const peer = (m: number): Lane => (axis === 'tp' ? { ...lane, rank: m } : { ...lane, replica: m });
  const r = spawnBusAllReduce<A>({
    runtime,
    bus,
    job: cfg.job,
    stage,
    sink: o.sink,
    launch: o.launch,
    members,
    member: axis === 'tp' ? lane.rank : lane.replica,
    subjectOf: (m) => laneSubject(cfg.job, `${axis}-reduce`, stage, peer(m)),
    name: `${axis}-reduce-${laneName(stage, lane)}`,
    // The replicas sum unrounded gradient sums (compute/replica-reduce.ts).
    dtype: axis === 'dp' ? 'float64' : 'float32',
    ...(cfg.train === null
      ? {
          costMs: (_key: string, bytes: number) => allReduceMs(profile, bytes, members),
          ...(axis === 'tp' ? { bytesOf: () => profile.communication.activationBytes } : {}),
        }
      : {}),
  });
  subs.push(r.subscription);
  return r;
}

/** The rank's member of its TP group; it tells the stage actor `forward.to` once that exists. */
export function spawnLaneTp(
  o: StageWiringOptions,
  forward: { to: ActorRef<StageActorMsg> | null },
  subs: Subscription[],
): ActorRef<TpGroupMsg> {
  const { lane, runtime, bus, cfg, durations, stage } = o;
  const emulatedMs = cfg.train === null || runtime.clock.kind === 'virtual' ? coordinationMs(durations.profile) : 0;
  const { member, subscription } = spawnTpGroupMember({
    runtime,
    bus,
    job: cfg.job,
    stage,
    lane: lane!,
    shape: o.plan.shape,
    tell: (msg) => {
      if (forward.to) runtime.send(forward.to, msg);
    },
    sink: o.sink,
    messageMs: () => emulatedMs,
    launch: o.launch,
  });
  subs.push(subscription);
  return member;
}
