// A node agent's jobs: what it keeps of each (hosted, or starting while its backend
// loads), its wiring and its stopping, the requests about one job (renew, status, finish,
// abort), the lease that drops a job whose launcher has gone quiet, and the server's
// permission refusals told to the launchers of the jobs they are of. The host request
// itself and the agent's other verbs are node-agent.ts.

import { quoteValue } from '../base/quote';
import { RealClock } from '../base/clock';
import { launchField } from '../transport/envelope';
import { Bus, PermissionDenial, Subscription } from '../transport/bus';
import { parseSubject } from '../transport/subjects';
import { StageStatus } from '../stage/stage-state';
import { ActorRuntime, ActorRef } from './runtime';
import { StageActorMsg } from './stage';
import { TraceBatcher } from './trace-batcher';
import { StagePlan } from './stage-host';
import { BatonEvent } from '../stage/events';
import { JobNotHostedError, LaunchMismatchError } from './node-protocol';

export interface HostedJob {
  runtime: ActorRuntime;
  computes: { dispose?(): void; snapshotNow?(): Promise<void> }[];
  stages: Map<number, ActorRef<StageActorMsg>>;
  subs: Subscription[];
  trace: TraceBatcher;
  leaseMs: number | null;
  /** The lease's timer, then the immediate that decides after the loop's poll phase. */
  leaseTimer: NodeJS.Timeout | NodeJS.Immediate | null;
  renewedAt: number;
  /** The launcher's reply subject. */
  replyTo: string;
  /** The launch id the launcher gave: on every message and trace batch of the job's stages. */
  launch?: string;
  /** The subjects of the permission refusals its launcher was told of (once each). */
  denied: Set<string>;
}

export interface StartingJob {
  launch?: string;
  aborted?: string;
}

/** The agent's jobs, and what acting on one needs of the agent. */
export interface NodeJobs {
  readonly name: string;
  /** The machine name the agent reports. */
  readonly machine: string;
  readonly bus: Bus;
  readonly jobs: ReadonlyMap<string, HostedJob>;
  /** Jobs between their host request and their wiring, with their launch id and whether an abort came meanwhile. */
  readonly starting: ReadonlyMap<string, StartingJob>;
  reply(to: unknown, msg: Record<string, unknown>): void;
  teardown(name: string, job: HostedJob): void;
  log(line: string): void;
}

/** The job's actors and subscriptions, all of them or none. */
export function wireJob(
  agent: NodeJobs,
  plan: StagePlan,
  reply: string,
  { stages, lane }: { stages: readonly number[]; lane?: { rank: number; replica: number } },
  leaseMs: number | null,
  launch: string | undefined,
): HostedJob {
  const runtime = new ActorRuntime(new RealClock(), `${agent.name}-${plan.job}`);
  runtime.onFailure = (f) => {
    agent.log(`node ${agent.name}: actor ${f.actor} failed: ${f.error.message}`);
    agent.reply(reply, {
      verb: 'failure',
      job: plan.job,
      actor: f.actor,
      message: `${f.error.name}: ${f.error.message}`,
    });
  };
  const job: HostedJob = {
    runtime,
    computes: [],
    stages: new Map(),
    subs: [],
    trace: new TraceBatcher(agent.bus, plan.job, launch, (line) => agent.log(`node ${agent.name}: ${line}`)),
    leaseMs,
    leaseTimer: null,
    renewedAt: 0,
    replyTo: reply,
    ...launchField(launch),
    denied: new Set(),
  };
  try {
    for (const s of stages) {
      job.trace.addStage(s);
      const sink = (e: BatonEvent) => job.trace.record(e);
      const w = plan.wire({ runtime, bus: agent.bus, stage: s, sink, launch: job.launch, ...(lane ? { lane } : {}) });
      job.stages.set(s, w.stage);
      job.computes.push(w.compute);
      job.subs.push(...w.subscriptions);
    }
  } catch (err) {
    // Stages wired before the failure must not live on, unreachable by abort.
    agent.teardown(plan.job, job);
    throw err;
  }
  job.subs.push(
    plan.answerClaims(agent.bus, {
      node: agent.name,
      pid: process.pid,
      host: agent.machine,
      ...(job.leaseMs !== null ? { leaseMs: job.leaseMs } : {}),
    }),
  );
  return job;
}

/** A request about one job, acted on only when it carries the launch id the job was hosted with. */
export async function answerJobRequest(
  agent: NodeJobs,
  verb: 'renew' | 'status' | 'finish' | 'abort',
  name: string,
  req: Record<string, unknown>,
): Promise<void> {
  const job = agent.jobs.get(name);
  const launch = job ? job.launch : agent.starting.get(name)?.launch;
  // A stale launcher (or any peer) must not renew, stop or collect another launch's job.
  if (launch !== undefined && req.launch !== launch)
    throw new LaunchMismatchError(
      `job ${name} is hosted here for launch ${launch}, not for launch ${quoteValue(req.launch)}; ${verb} refused`,
    );
  renewLease(agent, name);
  switch (verb) {
    case 'renew':
      if (!job && !agent.starting.has(name))
        throw new JobNotHostedError(
          `job ${name} is not hosted here (never, or no longer: finished, aborted, its lease ran out or this agent restarted)`,
        );
      agent.reply(req.reply, { verb: 'renewed', job: name });
      return;
    case 'status': {
      if (!job && !agent.starting.has(name))
        throw new JobNotHostedError(
          `job ${name} is not hosted here (never, or no longer: finished, aborted, its lease ran out or this agent restarted)`,
        );
      const statuses: StageStatus[] = [];
      if (job)
        for (const a of job.stages.values())
          statuses.push(await job.runtime.ask<StageActorMsg, StageStatus>(a, (reply) => ({ type: 'status', reply })));
      agent.reply(req.reply, { verb: 'status', statuses });
      return;
    }
    case 'finish': {
      if (!job) throw new JobNotHostedError(`no job ${quoteValue(req.job)} is hosted here`);
      job.trace.flush();
      await agent.bus.flush();
      agent.teardown(name, job);
      agent.log(`node ${agent.name}: job ${name} finished; its stages are stopped`);
      agent.reply(req.reply, {
        verb: 'finished',
        events: Object.fromEntries(job.trace.sent),
        failures: job.runtime.failures.map((f) => `${f.actor}: ${f.error.message}`),
        lostTrace: job.trace.lost,
      });
      return;
    }
    case 'abort': {
      // A job still loading its backend is refused when the load ends.
      const starting = agent.starting.get(name);
      if (starting) starting.aborted = 'aborted';
      if (job) await lastSnapshots(job);
      if (job && agent.jobs.get(name) === job) agent.teardown(name, job);
      agent.log(
        `node ${agent.name}: job ${name} aborted${job ? '; its stages are stopped' : starting ? ' while it was starting; it will not be hosted' : ' (not hosted here)'}`,
      );
      agent.reply(req.reply, { verb: 'aborted', job: name });
      return;
    }
  }
}

/** Asynchronous stages that keep snapshots send their state as it is before the job goes (a survivor of a loss resumes from it); each compute bounds its own wait (compute/async-training.ts). */
async function lastSnapshots(job: HostedJob): Promise<void> {
  const sent = job.computes.map((c) => c.snapshotNow?.()).filter((p) => p !== undefined);
  if (sent.length > 0) await Promise.allSettled(sent);
}

/** Stops everything a job holds: its trace, its lease, its subscriptions, its actors, its computes. */
export function stopJob(job: HostedJob): void {
  job.trace.stop();
  if (job.leaseTimer) {
    clearTimeout(job.leaseTimer as NodeJS.Timeout);
    clearImmediate(job.leaseTimer as NodeJS.Immediate);
  }
  for (const s of job.subs) s.unsubscribe();
  job.runtime.shutdown();
  for (const c of job.computes) c.dispose?.();
}

/** Restart a job's lease; a job hosted without one is kept until finished or aborted. */
export function renewLease(agent: NodeJobs, name: string): void {
  const job = agent.jobs.get(name);
  if (!job || job.leaseMs === null) return;
  job.renewedAt = performance.now();
  if (!job.leaseTimer) armLease(agent, name, job, job.leaseMs);
}

function armLease(agent: NodeJobs, name: string, job: HostedJob, ms: number): void {
  job.leaseTimer = setTimeout(() => {
    // A task that blocked this process may have kept renewals waiting in the socket: the
    // decision waits for the poll phase of this loop turn (setImmediate runs after it).
    job.leaseTimer = setImmediate(() => {
      job.leaseTimer = null;
      if (agent.jobs.get(name) !== job || job.leaseMs === null) return;
      const left = job.renewedAt + job.leaseMs - performance.now();
      if (left > 0) return armLease(agent, name, job, left);
      agent.log(
        `node ${agent.name}: job ${name}: nothing from its launcher for ${job.leaseMs} ms (lease expired); dropping its stages`,
      );
      agent.teardown(name, job);
    });
  }, ms);
}

/** Most distinct refused subjects a job's launcher is told of (it fails the job at the first). */
const MAX_DENIALS_TOLD = 16;

/**
 * The server refused this agent a publish or subscription (its NATS user lacks the
 * permission; the message is lost, so the job would wait forever): logged, and told once per
 * subject, as `{ verb: 'denied', job, operation, subject, message }`, to the launcher of the job
 * the subject is of, or of every job hosted here when it is of none (a request or reply subject).
 */
export function reportDenial(agent: NodeJobs, d: PermissionDenial): void {
  const what = `the NATS server refused it a ${d.operation} on ${quoteValue(d.subject, 200)} (${d.message})`;
  agent.log(`node ${agent.name}: ${what}`);
  const of = parseSubject(d.subject)?.job;
  for (const [name, job] of agent.jobs) {
    if (of !== undefined && of !== '_nodes' && of !== name) continue;
    if (job.denied.has(d.subject) || job.denied.size >= MAX_DENIALS_TOLD) continue;
    job.denied.add(d.subject);
    agent.reply(job.replyTo, {
      verb: 'denied',
      job: name,
      operation: d.operation,
      subject: d.subject,
      message: d.message,
      stages: [...job.stages.keys()].sort((a, b) => a - b),
    });
  }
}
