// A job spread over node agents (actors/node-agent.ts) connected by NATS: the launcher
// finds or spawns the nodes, asks each to host its stages, runs the coordinator
// itself, gathers every stage's events from the trace subjects, then validates the run
// exactly as a single-process one.

import { JobConfig } from './config';
import { buildResult } from './run-local';
import { planJob } from './wire-stage';
import { Launch } from './distributed-launch';

export { replyProblem } from './node-replies';

export { DistributedOptions, DistributedResult, assignStages } from './distributed-options';
import { DistributedOptions, DistributedResult, leaseOf } from './distributed-options';

export async function runDistributed(cfg: JobConfig, o: DistributedOptions): Promise<DistributedResult> {
  const wallStart = performance.now();
  const plan = planJob(cfg);
  const launch = new Launch(cfg, o, plan.shape.stages, leaseOf(cfg, o));
  try {
    await launch.announced();
    await launch.host();
    // The stages' new subscriptions must reach every server of a cluster before traffic starts.
    await new Promise((r) => setTimeout(r, o.settleMs ?? 200));
    const { records, rejects } = await launch.iterate(wallStart);
    await launch.finish();
    const trace = launch.trace;
    trace.events.sort((a, b) => a.t - b.t);
    const result = buildResult({
      cfg,
      shape: plan.shape,
      policy: plan.policy,
      records,
      events: trace.events,
      clock: 'real',
      transport: o.bus.kind,
      wallStart,
      validate: true,
      sharedClock: false,
      // Stage processes of one machine share its monotonic clock (base/clock.ts).
      clockOf: launch.machineOf(),
      coordinatorRejects: rejects,
      launcherRejects: launch.otherLaunch,
    });
    launch.completed = true;
    return { ...result, nodes: launch.nodesUsed() };
  } finally {
    launch.close();
  }
}
