// Wiring of one pipeline stage: its sender, stage and receiver actors, and the bus
// subscription that feeds the receiver. The same wiring serves a single-process job
// (actors/job.ts) and a node agent hosting stages for a distributed one (actors/node.ts).

import { HintPolicy } from '../policies/hint';
import { chooseWithBackpressure, inBackpressure } from '../policies/backpressure';
import { resolvePolicy } from '../policies/registry';
import { PipelineShape, validateShape } from '../policies/task';
import { makeDurationModel, DurationModel } from '../models/durations';
import { loadProfile } from '../models/profile';
import { Bus, Subscription } from '../transport/bus';
import { SubjectKind, checkJobName, subject } from '../transport/subjects';
import { Clock } from './clock';
import { TrainingCompute } from './training-compute';
import { resumeSnapshot } from './checkpoint';
import { loadBackend } from '../models/backend';
import { TrainConfig } from '../models/train-config';
import { EmulatedCompute, StageCompute } from './compute';
import { EventSink } from './events';
import { JobConfig } from './config';
import { spawnReceiver } from './receiver';
import { ActorRuntime, ActorRef } from './runtime';
import { spawnSender } from './sender';
import { StageActorMsg, spawnStage } from './stage';
import { Arbiter } from './stage-logic';

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

/** Load the tfjs backend a training config asks for (once per process). */
export async function loadTrainingBackend(t: TrainConfig): Promise<string> {
  return (await loadBackend({ force: t.backend ?? undefined })).backend;
}

export interface WiredStage {
  readonly stage: ActorRef<StageActorMsg>;
  readonly subscriptions: Subscription[];
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
  computeFor?: (stage: number, clock: Clock) => StageCompute;
}

export function wireStage(o: StageWiringOptions): WiredStage {
  const { runtime, bus, cfg, plan, durations, stage: s, sink } = o;
  const sender = spawnSender({ runtime, bus, job: cfg.job, stage: s, comm: durations, sink });
  const compute = o.computeFor ? o.computeFor(s, runtime.clock)
    : cfg.train ? new TrainingCompute(s, plan.shape, cfg.train, cfg.iterations, resumeSnapshot(cfg.train, s))
    : new EmulatedCompute(runtime.clock, s, durations);
  const arbiter = makeArbiter(plan.policy, cfg.bufferLimit);
  const stage = spawnStage({ stage: s, shape: plan.shape, policy: plan.policy, arbiter }, { runtime, compute, sender, sink });
  const receiver = spawnReceiver({ runtime, job: cfg.job, stage: s, target: stage, sink });
  const subscriptions = STAGE_INBOX_KINDS.map((kind) =>
    bus.subscribe(subject(cfg.job, kind, s), (subj, data) => runtime.send(receiver, { type: 'bytes', subject: subj, data })));
  return { stage, subscriptions };
}
