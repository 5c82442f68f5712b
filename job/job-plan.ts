// A job's plan, checked before anything runs: its policy and pipeline shape (every shape,
// mode and limit refused here with a JobConfigError), and the duration model of its
// stages (one per stage, or per lane of a wide job).

import { HintPolicy } from '../policies/hint';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, SHAPE_LIMITS, validateShape } from '../policies/task';
import { makeDurationModel, DurationModel } from '../models/durations';
import { loadProfile } from '../models/profile';
import { laneDurationModel } from '../models/lane-durations';
import { losesMessages } from '../transport/fault-spec';
import { checkJobName } from '../transport/subjects';
import { Lane } from '../transport/lanes';
import { CONSISTENCY_POLICIES } from '../actors/param-store';
import { JobConfig, partitionWeights } from './config';
import { JobConfigError } from './job-errors';
import { checkLanes } from './wire-lane';

/** Resolve the policy and the pipeline shape of a config, refusing unsupported shapes. */
export function planJob(cfg: JobConfig): { policy: HintPolicy; shape: PipelineShape } {
  checkJobName(cfg.job);
  const policy = resolvePolicy(cfg.policy);
  const shape: PipelineShape = {
    stages: cfg.stages,
    chunks: cfg.chunks,
    microbatches: cfg.microbatches,
    splitBackward: policy.splitBackward,
  };
  validateShape(shape);
  policy.check(shape);
  if (cfg.stageSpeeds !== null && cfg.stageSpeeds.length !== cfg.stages)
    throw new JobConfigError(`stage speeds: ${cfg.stageSpeeds.length} entries for ${cfg.stages} stages`);
  // A wide job's placement names the node of every stage actor (replica, rank, stage order).
  const actors = cfg.stages * cfg.tp * cfg.dp;
  if (cfg.placement !== null && cfg.placement.length !== cfg.stages && cfg.placement.length !== actors)
    throw new JobConfigError(
      `placement: ${cfg.placement.length} entries for ${cfg.stages} stages${actors > cfg.stages ? ` (or ${actors} stage actors)` : ''}`,
    );
  if (!Number.isInteger(cfg.iterations) || cfg.iterations < 1)
    throw new JobConfigError(`iterations must be a positive integer, got ${cfg.iterations}`);
  checkLanes(cfg);
  if (losesMessages(cfg.faults) && (cfg.mode === 'async' || cfg.tp > 1 || cfg.dp > 1))
    throw new JobConfigError(
      'injected drops are recovered by resending, which a plain synchronous pipeline has (not --mode async, --tp or --dp > 1): inject dup, delay or reorder only',
    );
  const perIteration = shape.stages * shape.chunks * shape.microbatches * (cfg.tp ?? 1) * (cfg.dp ?? 1);
  const iterations = cfg.iterations + (Number.isSafeInteger(cfg.warmupIterations) ? cfg.warmupIterations : 0);
  if (perIteration * iterations > SHAPE_LIMITS.run)
    throw new JobConfigError(
      `stages × chunks × microbatches × ranks × replicas × iterations (warm-up included) must be at most ${SHAPE_LIMITS.run}, got ${perIteration} × ${iterations} = ${perIteration * iterations} (a run keeps an event per task)`,
    );
  if (cfg.bufferLimit !== 'depth' && (!Number.isInteger(cfg.bufferLimit) || cfg.bufferLimit < 1))
    throw new JobConfigError(
      `buffer limit must be a positive integer or depth, got ${JSON.stringify(cfg.bufferLimit)}`,
    );
  if (cfg.mode === 'async') {
    if (shape.chunks !== 1)
      throw new JobConfigError(`asynchronous mode runs one chunk per stage, got chunks = ${shape.chunks}`);
    if (policy.splitBackward)
      throw new JobConfigError(
        `asynchronous mode updates after each whole backward; policy ${policy.name} splits backward into B and W`,
      );
    if (cfg.iterations !== 1)
      throw new JobConfigError(
        `asynchronous mode runs one continuous stream of microbatches (iterations = 1), got iterations = ${cfg.iterations}`,
      );
    if (!(CONSISTENCY_POLICIES as readonly string[]).includes(cfg.async.consistency))
      throw new JobConfigError(
        `unknown consistency policy ${JSON.stringify(cfg.async.consistency)}; known: ${CONSISTENCY_POLICIES.join(', ')}`,
      );
  }
  return { policy, shape };
}

export function durationModelFor(cfg: JobConfig, shape: PipelineShape): DurationModel {
  return makeDurationModel({
    profile: loadProfile(cfg.profile),
    shape,
    jitter: cfg.jitter,
    jitterScale: cfg.jitterScale,
    seed: cfg.seed,
    stageSpeeds: cfg.stageSpeeds ?? undefined,
    partitionWeights: partitionWeights(cfg),
  });
}

/** The durations of one lane of a wide job: its own draws, compute split over its T ranks. */
export function laneDurationsFor(cfg: JobConfig, shape: PipelineShape, lane: Lane): DurationModel {
  return laneDurationModel({
    profile: loadProfile(cfg.profile),
    shape,
    jitter: cfg.jitter,
    jitterScale: cfg.jitterScale,
    seed: cfg.seed,
    lane,
    rankJitter: cfg.rankJitter,
  });
}

/** Check a config as every stage will (policy, shape and, unless told the profile is
 * only on other machines, profile and jitter), so a launcher refuses a bad one before it
 * starts a server or a process for it. */
export function checkJob(cfg: JobConfig, o: { profileHere: boolean } = { profileHere: true }): void {
  const { shape } = planJob(cfg);
  if (o.profileHere) durationModelFor(cfg, shape);
}
