// Emulated durations of one rank of one replica. Every lane draws its own compute jitter
// (its seed is the job's, mixed with rank and replica; rank 0 of replica 0 keeps the job's
// seed, so a job with T = D = 1 draws exactly what it always did), so the ranks of a
// tensor-parallel group see different ready sets. Message delays (rank jitter):
// - shared (the default): the ranks of a group sit on one node, and their messages between
//   two stages travel the same link at the same time, so a message's network delay is drawn
//   once per (replica, iteration, stage, task), shared by the group's ranks (the draw rank 0
//   makes), times a per-rank part: a median-1 lognormal with the compute jitter's spread
//   (0.73 under --jitter paper or compute), for the ranks' sends starting at slightly
//   different times; it follows the compute jitter, so --jitter compute has it too (its
//   group draw is then the undisturbed delay) and --jitter none has none;
// - independent: each rank draws its message's whole delay itself (from its lane's seed),
//   so a group waits for the slowest of T heavy-tailed draws.
// A rank computes 1/T of its stage's work (Megatron's split, taken as ideal); the
// collectives it then runs cost an all-reduce of the activation on top (allReduceMs), and
// a coordination round costs one small message (coordinationMs). Not modelled: contention
// between a group's all-reduce and the pipeline's sends.

import { Task } from '../policies/task';
import { DurationModel, makeDurationModel } from './durations';
import { JitterMode, jitterSigmas, lognormalMultiplier } from './jitter';
import { keyedNormal } from './keyed-random';
import { WorkloadProfile } from './profile';
import { PipelineShape } from '../policies/task';

export interface LaneKey {
  readonly rank: number;
  readonly replica: number;
  readonly ranks: number;
}

/** How the ranks of a TP group draw their message delays (see the file's head). */
export type RankJitter = 'shared' | 'independent';

export const RANK_JITTER_MODES: readonly RankJitter[] = ['shared', 'independent'];

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
  /** How a TP group's ranks draw message delays (default shared); no effect at T = 1. */
  readonly rankJitter?: RankJitter;
}

/** The lane's duration model: its own compute draws divided by T, its message delays as `rankJitter` says. */
export function laneDurationModel(o: LaneDurationOptions): DurationModel {
  const inner = makeDurationModel({ ...o, seed: laneSeed(o.seed, o.lane) });
  const T = o.lane.ranks;
  if (T === 1) return inner;
  return {
    ...inner,
    compute: (iteration: number, stage: number, t: Task) => inner.compute(iteration, stage, t) / T,
    base: (stage, kind, chunk) => inner.base(stage, kind, chunk) / T,
    comm: (o.rankJitter ?? 'shared') === 'shared' ? sharedComm(o) : inner.comm,
  };
}

/** A rank's message delay under shared rank jitter: its group's draw (rank 0's) times the rank's own small part. */
function sharedComm(o: LaneDurationOptions): DurationModel['comm'] {
  const group = makeDurationModel({ ...o, seed: laneSeed(o.seed, { ...o.lane, rank: 0 }) });
  const sigma = jitterSigmas(o.jitter, o.jitterScale ?? 1);
  const seed = laneSeed(o.seed, o.lane);
  return (iteration, stage, t) => {
    const ms = group.comm(iteration, stage, t);
    if (ms === 0 || sigma.compute === 0) return ms;
    const event = t.kind === 'F' ? 'rank-send-activation' : 'rank-send-gradient';
    return (
      ms * lognormalMultiplier(sigma.compute, keyedNormal({ seed, iteration, stage, event, mb: t.mb, chunk: t.chunk }))
    );
  };
}
