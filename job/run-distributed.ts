// A job spread over node agents (actors/node-agent.ts) connected by NATS: the launcher
// finds or spawns the nodes, asks each to host its stages, runs the coordinator
// itself, gathers every stage's events from the trace subjects, then validates the run
// exactly as a single-process one. A recoverable job replays an iteration that lost a
// stage (job/recovery.ts), each attempt a launch of its own.

import { JobConfig } from './config';
import { buildResult } from './run-local';
import { planJob } from './wire-stage';
import { Launch } from './distributed-launch';
import { Attempts, recoverable } from './recovery';
import { IterationLostError } from './recovery-errors';
import { JobError } from './job-errors';

export { replyProblem } from './node-replies';

export {
  DistributedOptions,
  DistributedResult,
  RecoveryOptions,
  RecoveryRecord,
  assignStages,
} from './distributed-options';
import { DistributedOptions, DistributedResult, RecoveryOptions, leaseOf } from './distributed-options';

export async function runDistributed(cfg: JobConfig, o: DistributedOptions): Promise<DistributedResult> {
  const wallStart = performance.now();
  const plan = planJob(cfg);
  const leaseMs = leaseOf(cfg, o);
  const attempts =
    o.recovery && recoverable(cfg) ? new Attempts(cfg, o as DistributedOptions & { recovery: RecoveryOptions }) : null;
  try {
    for (;;) {
      const launch = new Launch(attempts?.cfg ?? cfg, o, plan.shape.stages, leaseMs, attempts?.hostRecovery);
      attempts?.follow(launch);
      try {
        return await runLaunch(launch, cfg, plan, wallStart, attempts);
      } catch (err) {
        // Without recovery a lost iteration is the job's failure, named as any other.
        if (!attempts) throw err instanceof IterationLostError ? new JobError(err.message, { cause: err }) : err;
        await attempts.recover(launch, err, (n) => launch.nodesUsed().find((x) => x.name === n)?.stages ?? []);
      } finally {
        launch.close();
      }
    }
  } finally {
    attempts?.close();
  }
}

/** One launch to its end: the job's remaining iterations, its trace, its result. */
async function runLaunch(
  launch: Launch,
  cfg: JobConfig,
  plan: ReturnType<typeof planJob>,
  wallStart: number,
  attempts: Attempts | null,
): Promise<DistributedResult> {
  const o = launch.options;
  await launch.announced();
  await launch.host();
  // The stages' new subscriptions must reach every server of a cluster before traffic starts.
  await new Promise((r) => setTimeout(r, o.settleMs ?? 200));
  const { records, rejects } = await launch.iterate(wallStart);
  await launch.finish();
  attempts?.stampResume(launch);
  const trace = launch.trace;
  const events = [...(attempts?.events ?? []), ...trace.events].sort((a, b) => a.t - b.t);
  if (attempts) for (const d of attempts.rejects.first) launch.otherLaunch.first.push(d);
  if (attempts) launch.otherLaunch.count += attempts.rejects.count;
  const result = buildResult({
    cfg,
    // A recovered asynchronous job's last attempt trains fewer microbatches (the rest of the stream).
    shape: launch.config === cfg ? plan.shape : planJob(launch.config).shape,
    policy: plan.policy,
    records: [...(attempts?.records ?? []), ...records],
    events,
    clock: 'real',
    transport: o.bus.kind,
    wallStart,
    validate: true,
    // After a recovery only the last attempt's trace is whole (a killed process's last batches are lost).
    validateAs: launch.config,
    sharedClock: false,
    // Stage processes of one machine share its monotonic clock (base/clock.ts).
    clockOf: launch.machineOf(),
    coordinatorRejects: rejects,
    launcherRejects: launch.otherLaunch,
  });
  launch.completed = true;
  const kept = attempts?.keptState();
  return {
    ...result,
    nodes: launch.nodesUsed(),
    ...(attempts ? { recoveries: attempts.recoveries, ...(kept ? { kept_state: kept } : {}) } : {}),
  };
}
