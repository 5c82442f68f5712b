// Recovery of an asynchronous job over NATS (job/recovery.ts's Attempts calls it). An
// asynchronous run never flushes, so there is no iteration to replay: every stage's
// parameter store snapshots its state every --snapshot-every updates and the launcher keeps
// the newest of each (job/snapshot-keeper.ts). When a stage is lost the launch ends (every
// node drops the job, with every microbatch in flight), the lost process is started again,
// and a new launch hosts every stage from its newest snapshot, the stream of microbatches
// resuming where job/async-resume.ts says; the updates lost and the microbatches skipped are
// reported per stage. The result is not that of a fault-free run (docs/operations.md).

import { JobConfig } from './config';
import { BatonEvent } from '../stage/events';
import { RecoveryRecord } from './distributed-options';
import { HostRecovery } from './stage-recovery';
import { SnapshotKeeper } from './snapshot-keeper';
import { asyncResumePlan, belowFloor, lostUpdates } from './async-resume';
import { IterationLostError } from './recovery-errors';

/** The job from microbatch `next` of its stream on (the same end). */
export function asyncResumedConfig(job: JobConfig, next: number): JobConfig {
  return { ...job, microbatches: job.microbatches - next, async: { ...job.async, firstMicrobatch: next } };
}

/** What the next attempt of an asynchronous job starts from, and the recovery's record. */
export interface AsyncRecovery {
  readonly cfg: JobConfig;
  readonly hostRecovery: HostRecovery;
  readonly record: RecoveryRecord;
}

/** The plan after `err` (the lost process already restarted): every stage from its newest snapshot; `backwardsSeen`: per stage, the failed attempt's backwards in its trace. */
export function asyncRecovery(
  job: JobConfig,
  keeper: SnapshotKeeper,
  err: IterationLostError,
  stages: number[],
  backwardsSeen: readonly number[],
): AsyncRecovery {
  const counts = keeper.resumeCounts();
  const plan = asyncResumePlan(counts, job.microbatches);
  const from = counts.map((c) => c.updates);
  const lost = lostUpdates(keeper.startUpdates(), backwardsSeen, keeper.belowFloorAtStart(), from);
  keeper.resumed(plan.resumed, belowFloor(plan));
  const snaps = keeper.snapshots();
  const resume = Object.fromEntries(snaps.flatMap((s, i) => (s ? [[String(i), s]] : [])));
  return {
    cfg: asyncResumedConfig(job, plan.next),
    hostRecovery: { stateEvery: job.async.snapshotEvery, resume },
    record: {
      failed: err.node,
      stages,
      reason: err.message,
      iteration: job.firstIteration,
      resumed_from: job.firstIteration,
      iterations_replayed: 0,
      detected_at: err.detectedAt,
      resumed_at: 0,
      recovery_ms: 0,
      snapshot_updates: from,
      resumed_at_microbatch: plan.next,
      lost_updates: lost,
      skipped_updates: plan.skipped,
    },
  };
}

/** Per stage, the backwards of `events` (one attempt's trace). */
export function backwardsPerStage(events: readonly BatonEvent[], stages: number): number[] {
  const n = new Array<number>(stages).fill(0);
  for (const e of events) if (e.type === 'task-end' && e.kind === 'B' && e.stage >= 0 && e.stage < stages) n[e.stage]++;
  return n;
}
