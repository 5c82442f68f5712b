// Emulated durations of one rank of one replica. Every lane draws its own jitter (its seed
// is the job's, mixed with rank and replica; rank 0 of replica 0 keeps the job's seed, so a
// job with T = D = 1 draws exactly what it always did), so the ranks of a tensor-parallel
// group see different ready sets. A rank computes 1/T of its stage's work (Megatron's split,
// taken as ideal); the collectives it then runs cost an all-reduce of the activation on top
// (allReduceMs), and a coordination round costs one small message (coordinationMs). Not
// modelled: contention between a group's all-reduce and the pipeline's sends.

import { Task } from '../policies/task';
import { DurationModel, makeDurationModel } from './durations';
import { JitterMode } from './jitter';
import { WorkloadProfile } from './profile';
import { PipelineShape } from '../policies/task';

export interface LaneKey {
  readonly rank: number;
  readonly replica: number;
  readonly ranks: number;
}

/** The seed of a lane's draws: the job's for lane 0, a distinct safe integer for every other. */
export function laneSeed(seed: number, lane: LaneKey): number {
  const index = lane.replica * lane.ranks + lane.rank;
  return index === 0 ? seed : (seed * 1_000_003 + index * 7_919) % Number.MAX_SAFE_INTEGER;
}

/** Ring all-reduce of `bytes` over `ranks` members: 2(T−1) steps of latency and 2(T−1)/T of the bytes. */
export function allReduceMs(profile: WorkloadProfile, bytes: number, ranks: number): number {
  if (ranks <= 1) return 0;
  const { latencyMs, bandwidthGBps } = profile.communication;
  return 2 * (ranks - 1) * latencyMs + ((2 * (ranks - 1)) / ranks) * (bytes / (bandwidthGBps * 1e6));
}

/** One coordination message (a task id and a round number, 16 bytes). */
export function coordinationMs(profile: WorkloadProfile): number {
  const { latencyMs, bandwidthGBps } = profile.communication;
  return latencyMs + 16 / (bandwidthGBps * 1e6);
}

export interface LaneDurationOptions {
  readonly profile: WorkloadProfile;
  readonly shape: PipelineShape;
  readonly jitter: JitterMode;
  readonly jitterScale?: number;
  readonly seed: number;
  readonly lane: LaneKey;
}

/** The lane's duration model: its own draws, compute divided by T. */
export function laneDurationModel(o: LaneDurationOptions): DurationModel {
  const inner = makeDurationModel({ ...o, seed: laneSeed(o.seed, o.lane) });
  const T = o.lane.ranks;
  if (T === 1) return inner;
  return {
    ...inner,
    compute: (iteration: number, stage: number, t: Task) => inner.compute(iteration, stage, t) / T,
    base: (stage, kind, chunk) => inner.base(stage, kind, chunk) / T,
  };
}
