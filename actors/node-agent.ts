// The node agent: one nact system in one OS process that hosts stage actors on
// request (what hosting a job's stages means — its config, plan and wiring — is the
// StageHost it is given: job/node-host.ts). Jobs reach it over the bus on `baton._nodes.<name>`; it announces itself
// on `baton._nodes.announce`, answers on the reply subject a request names, and
// publishes the events of the stages it hosts on `baton.<job>.trace.<stage>` in
// batches, so a watcher or the job's launcher sees every task and message.
//
// Requests (CBOR maps, transport/codec.ts encodeValue):
//   { verb: 'host', reply, config: JobConfig, stages: number[], leaseMs?, launch? }
//                                                          -> { verb: 'hosting', name, pid, host, stages, launch }
//   { verb: 'renew', reply, job, launch? }                 -> { verb: 'renewed', job }
//   { verb: 'status', reply, job, launch? }                -> { verb: 'status', name, statuses }
//     (both answered with a JobNotHostedError for a job not, or no longer, hosted here)
//   { verb: 'finish', reply, job, launch? }                -> { verb: 'finished', name, events: { [stage]: count } }
//   { verb: 'abort', reply, job, launch? }                 -> the job's actors are stopped
//   { verb: 'ping' }                                       -> a fresh hello on the announce subject
//   { verb: 'exit' }                                       -> the agent stops, as on SIGTERM
// A request that fails is answered { verb: 'error', name, request, error: <its Error's name>,
// input: <true when its error is bad input, exit status 2>, message }.
// renew, status, finish and abort act only when their launch is the hosted job's (a job
// hosted without one takes any); otherwise they are answered with an error, so a stale
// launcher cannot stop or collect a newer run of the same job name.
// An agent that is stopped (SIGTERM, SIGINT, exit) tells the launcher of each job it hosts:
//   { verb: 'leaving', job, reason }
// Malformed requests are answered with an error when they name a reply subject, and
// counted and logged otherwise; nothing a peer sends but exit can stop the agent. A job hosted
// with a lease is dropped when no request naming it (the launcher renews every few
// seconds) has come for leaseMs: a launcher that was killed leaves nothing behind.

import * as os from 'os';
import { EXIT_INPUT, exitStatusOf } from '../base/errors';
import { quoteValue } from '../base/quote';
import { RealClock } from '../base/clock';
import { Bus, Subscription } from '../transport/bus';
import { decodeValue, encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { PayloadTooLargeError } from '../transport/nats-bus';
import { EventSink } from '../stage/events';
import { StageStatus } from '../stage/stage-logic';
import { ActorRuntime, ActorRef } from './runtime';
import { StageActorMsg } from './stage';
import { TraceBatcher } from './trace-batcher';
import {
  ANNOUNCE_SUBJECT,
  JobNotHostedError,
  LaunchMismatchError,
  NODES_PREFIX,
  NodeRequestError,
  hostFields,
  isReplySubject,
  jobName,
  nodeSubject,
} from './node-protocol';

export {
  ANNOUNCE_SUBJECT,
  JobNotHostedError,
  LaunchMismatchError,
  MAX_NODE_NAME,
  MIN_LEASE_MS,
  NODES_PREFIX,
  NODE_NAME_RE,
  nodeSubject,
} from './node-protocol';

/** One stage as the agent keeps it: its actor, its bus subscriptions and its compute. */
export interface HostedStage {
  readonly stage: ActorRef<StageActorMsg>;
  readonly subscriptions: Subscription[];
  readonly compute: { dispose?(): void };
}

/** What a host request's config means on this agent, checked as far as it can be without
 * the agent's own state (job/node-host.ts makes it from a job config). */
export interface StagePlan {
  readonly job: string;
  /** P: the pipeline's stages (a request's stages must be among 0..P-1). */
  readonly stages: number;
  /** The checks that come after the agent's own (the workload profile). */
  check(): void;
  /** What must be loaded before the stages are wired (the tfjs backend of real compute). */
  prepare(): Promise<void>;
  wire(o: { runtime: ActorRuntime; bus: Bus; stage: number; sink: EventSink; launch?: string }): HostedStage;
  /** Answer the job's name claims while the agent hosts it. */
  answerClaims(bus: Bus, info: Record<string, unknown>): Subscription;
}

/** Turns a host request's config into a plan, or throws the config's error (its name
 * tells the launcher whether it is bad input). */
export type StageHost = (config: unknown, o: { allowFiles: boolean }) => StagePlan;

interface HostedJob {
  runtime: ActorRuntime;
  computes: { dispose?(): void }[];
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
}

interface StartingJob {
  launch?: string;
  aborted?: string;
}

export interface NodeAgentOptions {
  name: string;
  bus: Bus;
  /** What hosting a job's stages means (job/node-host.ts). */
  stageHost: StageHost;
  log?: (line: string) => void;
  /** Load the policy modules and profile files a host request names (any peer on the bus
   * can send one, so off by default: `baton node --allow-files`). */
  allowFiles?: boolean;
  /** The machine name it reports (default os.hostname()): with its pid, what tells its process apart. */
  host?: string;
}

export class NodeAgent {
  readonly name: string;
  private readonly bus: Bus;
  private readonly jobs = new Map<string, HostedJob>();
  /** Jobs between their host request and their wiring (the backend may be loading), with
   * their launch id and whether an abort (or exit) came meanwhile. */
  private readonly starting = new Map<string, StartingJob>();
  private readonly log: (line: string) => void;
  private readonly allowFiles: boolean;
  private readonly stageHost: StageHost;
  private readonly machine: string;
  private sub: Subscription | null = null;
  private exitResolve: () => void = () => {};
  readonly exited = new Promise<void>((r) => (this.exitResolve = r));
  rejected = 0;

  constructor(o: NodeAgentOptions) {
    this.name = o.name;
    this.bus = o.bus;
    this.log = o.log ?? (() => {});
    this.allowFiles = o.allowFiles ?? false;
    this.stageHost = o.stageHost;
    this.machine = o.host ?? os.hostname();
  }

  start(): void {
    this.sub = this.bus.subscribe(nodeSubject(this.name), (_s, data) => this.onRequest(data));
    this.announce();
  }

  announce(): void {
    this.bus.publish(
      ANNOUNCE_SUBJECT,
      encodeValue({ verb: 'hello', name: this.name, pid: process.pid, host: this.machine }),
    );
  }

  /** Answer on a request's reply subject; a subject a peer got wrong is logged, never thrown. */
  private reply(to: unknown, msg: Record<string, unknown>): void {
    if (typeof to !== 'string' || !to.startsWith(`${NODES_PREFIX}.reply.`)) return;
    if (!isReplySubject(to)) {
      this.rejected++;
      this.log(`node ${this.name}: cannot answer on ${quoteValue(to)}: not a valid subject`);
      return;
    }
    try {
      this.bus.publish(to, encodeValue({ ...msg, name: this.name }));
    } catch (err) {
      this.rejected++;
      this.log(`node ${this.name}: cannot answer on ${quoteValue(to)}: ${(err as Error).message}`);
      // An answer too big for the server still gets a small one, so the asker knows this node lives.
      if (err instanceof PayloadTooLargeError)
        try {
          this.bus.publish(
            to,
            encodeValue({
              verb: 'error',
              name: this.name,
              message: `the ${quoteValue(msg.verb)} answer is ${err.size} bytes, over the server's max_payload of ${err.limit}`,
            }),
          );
        } catch {
          /* logged above */
        }
    }
  }

  private onRequest(data: Uint8Array): void {
    let req: Record<string, unknown>;
    try {
      const v = decodeValue(data);
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new NodeRequestError(`request must be a map, got ${typeof v}`);
      req = v as Record<string, unknown>;
    } catch (err) {
      this.rejected++;
      this.log(`node ${this.name}: rejected a malformed request: ${(err as Error).message}`);
      return;
    }
    void this.handle(req).catch((err: unknown) => {
      const e = err instanceof Error ? err : new Error(quoteValue(err));
      const verb = typeof req.verb === 'string' ? req.verb : quoteValue(req.verb);
      this.rejected++;
      this.log(`node ${this.name}: ${verb} failed: ${e.message}`);
      this.reply(req.reply, {
        verb: 'error',
        request: verb,
        error: e.name,
        input: exitStatusOf(e) === EXIT_INPUT,
        message: `${e.name}: ${e.message}`,
      });
    });
  }

  private async handle(req: Record<string, unknown>): Promise<void> {
    switch (req.verb) {
      case 'host':
        return this.host(req);
      case 'ping':
        this.announce();
        return;
      case 'renew':
      case 'status':
      case 'finish':
      case 'abort':
        return this.jobRequest(req.verb, jobName(req.job), req);
      case 'exit':
        this.log(`node ${this.name}: a peer asked this agent to exit; telling the launchers of its jobs and exiting`);
        this.leave('a peer asked it to exit');
        for (const starting of this.starting.values()) starting.aborted = 'this agent was asked to exit';
        this.sub?.unsubscribe();
        this.exitResolve();
        return;
      default:
        throw new NodeRequestError(
          `unknown verb ${quoteValue(req.verb)} (expected host, ping, renew, status, finish, abort or exit)`,
        );
    }
  }

  /** A request about one job, acted on only when it carries the launch id the job was hosted with. */
  private async jobRequest(
    verb: 'renew' | 'status' | 'finish' | 'abort',
    name: string,
    req: Record<string, unknown>,
  ): Promise<void> {
    const job = this.jobs.get(name);
    const launch = job ? job.launch : this.starting.get(name)?.launch;
    // A stale launcher (or any peer) must not renew, stop or collect another launch's job.
    if (launch !== undefined && req.launch !== launch)
      throw new LaunchMismatchError(
        `job ${name} is hosted here for launch ${launch}, not for launch ${quoteValue(req.launch)}; ${verb} refused`,
      );
    this.renew(name);
    switch (verb) {
      case 'renew':
        if (!job && !this.starting.has(name))
          throw new JobNotHostedError(
            `job ${name} is not hosted here (never, or no longer: finished, aborted, its lease ran out or this agent restarted)`,
          );
        this.reply(req.reply, { verb: 'renewed', job: name });
        return;
      case 'status': {
        if (!job && !this.starting.has(name))
          throw new JobNotHostedError(
            `job ${name} is not hosted here (never, or no longer: finished, aborted, its lease ran out or this agent restarted)`,
          );
        const statuses: StageStatus[] = [];
        if (job)
          for (const a of job.stages.values())
            statuses.push(await job.runtime.ask<StageActorMsg, StageStatus>(a, (reply) => ({ type: 'status', reply })));
        this.reply(req.reply, { verb: 'status', statuses });
        return;
      }
      case 'finish': {
        if (!job) throw new JobNotHostedError(`no job ${quoteValue(req.job)} is hosted here`);
        job.trace.flush();
        await this.bus.flush();
        this.teardown(name, job);
        this.log(`node ${this.name}: job ${name} finished; its stages are stopped`);
        this.reply(req.reply, {
          verb: 'finished',
          events: Object.fromEntries(job.trace.sent),
          failures: job.runtime.failures.map((f) => `${f.actor}: ${f.error.message}`),
          lostTrace: job.trace.lost,
        });
        return;
      }
      case 'abort': {
        // A job still loading its backend is refused when the load ends.
        const starting = this.starting.get(name);
        if (starting) starting.aborted = 'aborted';
        if (job) this.teardown(name, job);
        this.log(
          `node ${this.name}: job ${name} aborted${job ? '; its stages are stopped' : starting ? ' while it was starting; it will not be hosted' : ' (not hosted here)'}`,
        );
        this.reply(req.reply, { verb: 'aborted', job: name });
        return;
      }
    }
  }

  private async host(req: Record<string, unknown>): Promise<void> {
    const { reply, stages, leaseMs, launch } = hostFields(req);
    const plan = this.stageHost(req.config, { allowFiles: this.allowFiles });
    if (this.jobs.has(plan.job) || this.starting.has(plan.job))
      throw new NodeRequestError(`job ${plan.job} is already hosted here`);
    for (const s of stages)
      if (s < 0 || s >= plan.stages) throw new NodeRequestError(`host: stage ${s} is outside 0..${plan.stages - 1}`);
    plan.check();
    const starting: StartingJob = launchField(launch);
    this.starting.set(plan.job, starting);
    try {
      await plan.prepare();
    } finally {
      this.starting.delete(plan.job);
    }
    if (starting.aborted)
      throw new NodeRequestError(`job ${plan.job} is not hosted: ${starting.aborted} while it was starting`);
    const job = this.wireJob(plan, reply, stages, leaseMs ?? null, launch);
    this.jobs.set(plan.job, job);
    this.renew(plan.job);
    this.log(
      `node ${this.name}: hosting job ${plan.job} stages ${stages.join(',')}${job.leaseMs !== null ? ` (lease ${job.leaseMs} ms)` : ''}`,
    );
    this.reply(reply, {
      verb: 'hosting',
      pid: process.pid,
      host: this.machine,
      stages,
      job: plan.job,
      ...launchField(job.launch),
    });
  }

  /** The job's actors and subscriptions, all of them or none. */
  private wireJob(
    plan: StagePlan,
    reply: string,
    stages: readonly number[],
    leaseMs: number | null,
    launch: string | undefined,
  ): HostedJob {
    const runtime = new ActorRuntime(new RealClock(), `${this.name}-${plan.job}`);
    runtime.onFailure = (f) => {
      this.log(`node ${this.name}: actor ${f.actor} failed: ${f.error.message}`);
      this.reply(reply, {
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
      trace: new TraceBatcher(this.bus, plan.job, launch, (line) => this.log(`node ${this.name}: ${line}`)),
      leaseMs,
      leaseTimer: null,
      renewedAt: 0,
      replyTo: reply,
      ...launchField(launch),
    };
    try {
      for (const s of stages) {
        job.trace.addStage(s);
        const w = plan.wire({ runtime, bus: this.bus, stage: s, sink: (e) => job.trace.record(e), launch: job.launch });
        job.stages.set(s, w.stage);
        job.computes.push(w.compute);
        job.subs.push(...w.subscriptions);
      }
    } catch (err) {
      // Stages wired before the failure must not live on, unreachable by abort.
      this.teardown(plan.job, job);
      throw err;
    }
    job.subs.push(
      plan.answerClaims(this.bus, {
        node: this.name,
        pid: process.pid,
        host: this.machine,
        ...(job.leaseMs !== null ? { leaseMs: job.leaseMs } : {}),
      }),
    );
    return job;
  }

  /** The agent is being stopped: every launcher it hosts stages for hears so at once, and the stages go. */
  leave(reason: string): void {
    for (const [name, job] of [...this.jobs]) {
      this.reply(job.replyTo, { verb: 'leaving', job: name, reason });
      this.teardown(name, job);
    }
  }

  /** Restart a job's lease; a job hosted without one is kept until finished or aborted. */
  private renew(name: string): void {
    const job = this.jobs.get(name);
    if (!job || job.leaseMs === null) return;
    job.renewedAt = performance.now();
    if (!job.leaseTimer) this.armLease(name, job, job.leaseMs);
  }

  private armLease(name: string, job: HostedJob, ms: number): void {
    job.leaseTimer = setTimeout(() => {
      // A task that blocked this process may have kept renewals waiting in the socket: the
      // decision waits for the poll phase of this loop turn (setImmediate runs after it).
      job.leaseTimer = setImmediate(() => {
        job.leaseTimer = null;
        if (this.jobs.get(name) !== job || job.leaseMs === null) return;
        const left = job.renewedAt + job.leaseMs - performance.now();
        if (left > 0) return this.armLease(name, job, left);
        this.log(
          `node ${this.name}: job ${name}: nothing from its launcher for ${job.leaseMs} ms (lease expired); dropping its stages`,
        );
        this.teardown(name, job);
      });
    }, ms);
  }

  private teardown(name: string, job: HostedJob): void {
    job.trace.stop();
    if (job.leaseTimer) {
      clearTimeout(job.leaseTimer as NodeJS.Timeout);
      clearImmediate(job.leaseTimer as NodeJS.Immediate);
    }
    for (const s of job.subs) s.unsubscribe();
    job.runtime.shutdown();
    for (const c of job.computes) c.dispose?.();
    this.jobs.delete(name);
  }
}
