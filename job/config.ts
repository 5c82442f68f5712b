// A job's config: every field documented once (its default is in job/defaults.ts). CLI
// flags map onto these fields one to one (cli/args.ts), and every command can print the
// resolved config.

import { JitterMode } from '../models/jitter';
import type { RankJitter } from '../models/lane-durations';
import { BufferLimit } from '../policies/backpressure';
import { FaultSpec } from '../transport/fault-spec';
import { TrainConfig } from '../models/train-config';
import { AsyncSettings } from '../actors/param-store';
import { JOB_DEFAULTS } from './defaults';

export interface JobConfig {
  /** Job name: the <job> token of every subject (baton.<job>.…). */
  job: string;
  /** P: pipeline stages (physical). */
  stages: number;
  /** M: microbatches per iteration. */
  microbatches: number;
  /** V: model chunks per stage (interleaved virtual stages). */
  chunks: number;
  /** T: tensor-parallel ranks per stage, each its own stage actor (TP > 1 coordinates F and B, RRFP §4.2). */
  tp: number;
  /** D: data-parallel replicas of the pipeline (replica r takes microbatches r·M … r·M+M−1; sync mode). */
  dp: number;
  /** Hint order (bf, fb, b-priority, f-priority, bfw), binding schedule (gpipe, 1f1b,
   * interleaved-1f1b, zb-h1), hint:<schedule>, or a path to a policy module. */
  policy: string;
  /** Workload profile: uniform, llm, multimodal, or a JSON file. */
  profile: string;
  /** Duration jitter: none, compute (compute only) or paper (compute and communication, RRFP §2.2). */
  jitter: JitterMode;
  /** Multiplies the jitter spreads (0 = none, 1 = the paper's). */
  jitterScale: number;
  /** TP > 1: a group's ranks share each message's network delay and add a small per-rank part
   * (shared), or each rank draws its whole delay (independent); models/lane-durations.ts. */
  rankJitter: RankJitter;
  /** Forwards a stage may hold before it drains backward-only (RRFP appendix C.2): one
   * count for every stage, or `depth` (P − s at stage s). */
  bufferLimit: BufferLimit;
  /** Seed of the realized durations: same seed, same durations for every policy. */
  seed: number;
  /** Iterations to run (each ends with a flush). */
  iterations: number;
  /** Extra iterations run first and left out of the statistics (they warm up JIT and connections). */
  warmupIterations: number;
  /** A real-clock run that sees no progress for this long ends with a deadlock error. */
  stallTimeoutMs: number;
  /** Number of the first iteration (a resumed training run continues its numbering). */
  firstIteration: number;
  /** Real compute: what to train (null: emulated compute from the profile). */
  train: TrainConfig | null;
  /** sync: accumulate, step after all M (a flush). async: each stage updates after every
   * backward, no flush; one continuous iteration (the CLI turns M x I into one stream). */
  mode: 'sync' | 'async';
  /** Asynchronous mode: consistency policy and optimizer settings of the parameter stores. */
  async: AsyncSettings;
  /** speed: layers are split in proportion to each stage's speed (stageSpeeds); uniform: evenly. */
  partition: 'uniform' | 'speed';
  /** Relative speed of the node each stage runs on (null: all 1). Emulated compute runs 1/speed as long. */
  stageSpeeds: readonly number[] | null;
  /** The node each stage runs on, as placed (job/placement.ts; a wide job placed on measured speeds: of every stage actor, replica, rank, stage order); null: not placed. With --nodes agents, the agent that hosts it; else recorded only. */
  placement: readonly string[] | null;
  /** Faults injected into the stages' activations and gradients (transport/fault-bus.ts); null: none. */
  faults: FaultSpec | null;
}

/** The weights the partition balances by: the stages' speeds under a speed-aware partition, else none. */
export function partitionWeights(cfg: JobConfig): readonly number[] | undefined {
  return cfg.partition === 'speed' && cfg.stageSpeeds ? cfg.stageSpeeds : undefined;
}

/** The job's defaults (job/defaults.ts). */
export const DEFAULTS: JobConfig = JOB_DEFAULTS;

/** `partial` over the defaults; an asynchronous job without a buffer limit gets `depth`,
 * so each stage keeps 1F1B's in-flight count (what PipeDream-style asynchronous pipelines,
 * and the staleness their consistency policies expect, assume). */
export function resolveConfig(partial: Partial<JobConfig>): JobConfig {
  const out = { ...DEFAULTS };
  for (const [k, v] of Object.entries(partial)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  if (partial.bufferLimit === undefined && out.mode === 'async') out.bufferLimit = 'depth';
  return out;
}
