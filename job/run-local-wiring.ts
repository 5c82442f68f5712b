// The pieces runJob (run-local.ts) puts together: the coordinator, the policy actor's
// control, the seal refusals, the stages' statuses for a deadlock report, actor failures.

import { Bus } from '../transport/bus';
import { AuthBus } from '../transport/auth-bus';
import { quoteValue } from '../base/quote';
import { RejectTally, newRejectTally, tallyReject } from '../base/reject-tally';
import { IterationRecord, coordinate } from '../actors/coordinator';
import { ActorRuntime, ActorRef } from '../actors/runtime';
import { StageActorMsg } from '../actors/stage';
import { StageStatus } from '../stage/stage-state';
import { HintPolicy } from '../policies/hint';
import { PipelineShape } from '../policies/task';
import { lanesOf } from '../transport/lanes';
import { requiredReportFields } from '../checks/report-body';
import { JobConfig } from './config';
import { JobError } from './wire-stage';
import { SwapOptions, startPolicyControl } from './policy-control';

/** The job's coordinator: it starts every iteration and collects the stages' reports. */
export function coordinatorOf(
  runtime: ActorRuntime,
  bus: Bus,
  cfg: JobConfig,
  shape: PipelineShape,
  launch: string | undefined,
  onIteration: (r: IterationRecord) => void,
): ReturnType<typeof coordinate> {
  return coordinate({
    runtime,
    bus,
    job: cfg.job,
    stages: shape.stages,
    ranks: cfg.tp,
    replicas: cfg.dp,
    microbatches: shape.microbatches,
    iterations: cfg.warmupIterations + cfg.iterations,
    firstIteration: cfg.firstIteration,
    onIteration,
    launch,
    reportFields: (st) => requiredReportFields(cfg, st),
  });
}

/** Refusals of a sealed bus (what is not sealed under the job's key, before any stage sees it), counted. */
export function sealRejectTally(bus: Bus): RejectTally {
  const tally = newRejectTally();
  if (bus instanceof AuthBus)
    bus.onReject = (reason, subj, detail) =>
      tallyReject(tally, `${quoteValue(subj, 200)}: refused ${detail} (${reason})`);
  return tally;
}

/** Every stage actor's status (for a deadlock report), each naming its lane when the job has several. */
export function stageStatuses(
  runtime: ActorRuntime,
  stages: readonly ActorRef<StageActorMsg>[],
  lanes: ReturnType<typeof lanesOf>,
  perLane: number,
): Promise<StageStatus[]> {
  return Promise.all(
    stages.map((a, i) =>
      runtime
        .ask<StageActorMsg, StageStatus>(a, (reply) => ({ type: 'status', reply }))
        .then((st) => {
          const l = lanes[Math.floor(i / perLane)];
          return lanes.length > 1 ? { ...st, lane: `(rank ${l.rank}, replica ${l.replica})` } : st;
        }),
    ),
  );
}

/** Fails the job with the first failures of its actors, if any failed. */
export function throwActorFailures(runtime: ActorRuntime): void {
  if (runtime.failures.length > 0)
    throw new JobError(
      `actor failures: ${runtime.failures
        .slice(0, 5)
        .map((f) => `${f.actor}: ${f.error.message}`)
        .join('; ')}`,
      { cause: runtime.failures[0].error },
    );
}

/** The job's policy actor and its subscription; `progress` says how many iterations ended and whether one has begun. */
export function policyControlOf(
  runtime: ActorRuntime,
  bus: Bus,
  cfg: JobConfig,
  shape: PipelineShape,
  initial: HintPolicy,
  launch: string | undefined,
  swaps: SwapOptions | undefined,
  progress: () => { ended: number; begun: boolean },
): ReturnType<typeof startPolicyControl> {
  return startPolicyControl({
    runtime,
    bus,
    job: cfg.job,
    shape,
    initial,
    launch,
    options: swaps,
    consistency: cfg.mode === 'async' ? cfg.async.consistency : undefined,
    position: () => ({
      mode: cfg.mode,
      nextIteration: cfg.firstIteration + progress().ended + (progress().begun ? 1 : 0),
      lastIteration: cfg.firstIteration + cfg.warmupIterations + cfg.iterations - 1,
      tp: cfg.tp,
      dp: cfg.dp,
    }),
  });
}
