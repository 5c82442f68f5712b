// The node agent: one nact system in one OS process that hosts stage actors on
// request. Jobs reach it over the bus on `baton._nodes.<name>`; it announces itself
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
// A request that fails is answered { verb: 'error', name, request, error: <its Error's name>, message }.
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
import { Bus, Subscription } from '../transport/bus';
import { decodeValue, encodeValue, quoteValue } from '../transport/codec';
import { LAUNCH_EXPECTED, LAUNCH_RE, launchField } from '../transport/envelope';
import { PayloadTooLargeError } from '../transport/nats-bus';
import { subject } from '../transport/subjects';
import { MAX_SUBJECT_BYTES, checkSubject } from '../transport/local-bus';
import { MAX_TIMER_MS, RealClock } from './clock';
import { BatonEvent } from './events';
import { answerJobClaims } from './job-claim';
import { JobConfig, resolveConfig } from './config';
import { checkConfigShape } from './config-shape';
import { ActorRuntime, ActorRef } from './runtime';
import { StageActorMsg } from './stage';
import { StageStatus } from './stage-logic';
import { StageCompute } from './compute';
import { isModulePath } from '../policies/registry';
import { isProfilePath } from '../models/profile';
import { durationModelFor, loadTrainingBackend, planJob, wireStage } from './wire-stage';

export const NODES_PREFIX = 'baton._nodes';
export const ANNOUNCE_SUBJECT = `${NODES_PREFIX}.announce`;
export const nodeSubject = (name: string) => `${NODES_PREFIX}.${name}`;

/** Node names are one subject token. */
export const NODE_NAME_RE = /^[A-Za-z0-9_-]+$/;
/** The longest node name: its subject, baton._nodes.<name>, must fit the bus's MAX_SUBJECT_BYTES. */
export const MAX_NODE_NAME = MAX_SUBJECT_BYTES - `${NODES_PREFIX}.`.length;

const TRACE_BATCH = 256;
const TRACE_FLUSH_MS = 50;

interface HostedJob {
  runtime: ActorRuntime;
  computes: StageCompute[];
  stages: Map<number, ActorRef<StageActorMsg>>;
  subs: Subscription[];
  pending: Map<number, BatonEvent[]>;
  sent: Map<number, number>;
  flushTimer: NodeJS.Timeout | null;
  leaseMs: number | null;
  /** The lease's timer, then the immediate that decides after the loop's poll phase. */
  leaseTimer: NodeJS.Timeout | NodeJS.Immediate | null;
  renewedAt: number;
  /** Trace batches that could not be published (the finish answer reports them). */
  lostTrace: string[];
  /** The launcher's reply subject. */
  replyTo: string;
  /** The launch id the launcher gave: on every message and trace batch of the job's stages. */
  launch?: string;
}

interface StartingJob {
  launch?: string;
  aborted?: string;
}

/** Shortest lease a launcher may ask for (renewals travel over the bus). */
export const MIN_LEASE_MS = 1000;

/** A renew or status for a job this agent does not host. */
export class JobNotHostedError extends Error {
  override name = 'JobNotHostedError';
}

/** A job request that carries another launch id than the hosted job's. */
export class LaunchMismatchError extends Error {
  override name = 'LaunchMismatchError';
}

export interface NodeAgentOptions {
  name: string;
  bus: Bus;
  log?: (line: string) => void;
  /** Load the policy modules and profile files a host request names (any peer on the bus
   * can send one, so off by default: `baton node --allow-files`). */
  allowFiles?: boolean;
  /** The machine name it reports (default os.hostname()): with its pid, what tells its process apart. */
  host?: string;
}

/** A host request naming a file (policy module, profile) on an agent started without --allow-files. */
export class FilesNotAllowedError extends Error {
  override name = 'FilesNotAllowedError';
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
        throw new Error(`request must be a map, got ${typeof v}`);
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
      this.reply(req.reply, { verb: 'error', request: verb, error: e.name, message: `${e.name}: ${e.message}` });
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
        throw new Error(
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
        if (!job) throw new Error(`no job ${quoteValue(req.job)} is hosted here`);
        this.flushTrace(name, job);
        await this.bus.flush();
        this.teardown(name, job);
        this.log(`node ${this.name}: job ${name} finished; its stages are stopped`);
        this.reply(req.reply, {
          verb: 'finished',
          events: Object.fromEntries(job.sent),
          failures: job.runtime.failures.map((f) => `${f.actor}: ${f.error.message}`),
          lostTrace: job.lostTrace,
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
    // Stages no launcher can be told about could only be reached by a lease running out.
    if (!isReplySubject(req.reply))
      throw new Error(`host: reply must be a subject under ${NODES_PREFIX}.reply., got ${quoteValue(req.reply)}`);
    const stages = req.stages;
    if (!Array.isArray(stages) || stages.length === 0 || !stages.every((s) => Number.isInteger(s)))
      throw new Error(`host: stages must be a non-empty list of integers, got ${quoteValue(stages)}`);
    if (new Set(stages).size !== stages.length)
      throw new Error(`host: stages must not repeat, got ${quoteValue(stages)}`);
    const leaseMs = req.leaseMs;
    if (
      leaseMs !== undefined &&
      !(Number.isSafeInteger(leaseMs) && (leaseMs as number) >= MIN_LEASE_MS && (leaseMs as number) <= MAX_TIMER_MS)
    )
      throw new Error(
        `host: leaseMs must be an integer from ${MIN_LEASE_MS} to ${MAX_TIMER_MS}, got ${quoteValue(leaseMs)}`,
      );
    const launch = req.launch;
    if (launch !== undefined && !(typeof launch === 'string' && LAUNCH_RE.test(launch)))
      throw new Error(`host: launch must be ${LAUNCH_EXPECTED}, got ${quoteValue(launch)}`);
    const cfg: JobConfig = resolveConfig(checkConfigShape(req.config));
    if (!this.allowFiles) refuseFiles(cfg);
    const plan = planJob(cfg);
    if (this.jobs.has(cfg.job) || this.starting.has(cfg.job)) throw new Error(`job ${cfg.job} is already hosted here`);
    for (const s of stages as number[])
      if (s < 0 || s >= plan.shape.stages) throw new Error(`host: stage ${s} is outside 0..${plan.shape.stages - 1}`);
    const durations = durationModelFor(cfg, plan.shape);
    const starting: StartingJob = launchField(launch as string | undefined);
    this.starting.set(cfg.job, starting);
    try {
      if (cfg.train) await loadTrainingBackend(cfg.train);
    } finally {
      this.starting.delete(cfg.job);
    }
    if (starting.aborted) throw new Error(`job ${cfg.job} is not hosted: ${starting.aborted} while it was starting`);
    const runtime = new ActorRuntime(new RealClock(), `${this.name}-${cfg.job}`);
    runtime.onFailure = (f) => {
      this.log(`node ${this.name}: actor ${f.actor} failed: ${f.error.message}`);
      this.reply(req.reply, {
        verb: 'failure',
        job: cfg.job,
        actor: f.actor,
        message: `${f.error.name}: ${f.error.message}`,
      });
    };
    const job: HostedJob = {
      runtime,
      computes: [],
      stages: new Map(),
      subs: [],
      pending: new Map(),
      sent: new Map(),
      flushTimer: null,
      leaseMs: (leaseMs as number | undefined) ?? null,
      leaseTimer: null,
      renewedAt: 0,
      lostTrace: [],
      replyTo: req.reply,
      ...launchField(launch as string | undefined),
    };
    try {
      for (const s of stages as number[]) {
        job.pending.set(s, []);
        job.sent.set(s, 0);
        const sink = (e: BatonEvent) => this.record(cfg.job, job, e);
        const w = wireStage({ runtime, bus: this.bus, cfg, plan, durations, stage: s, sink, launch: job.launch });
        job.stages.set(s, w.stage);
        job.computes.push(w.compute);
        job.subs.push(...w.subscriptions);
      }
    } catch (err) {
      // Stages wired before the failure must not live on, unreachable by abort.
      this.teardown(cfg.job, job);
      throw err;
    }
    job.subs.push(
      answerJobClaims(this.bus, cfg.job, {
        node: this.name,
        pid: process.pid,
        host: this.machine,
        ...(job.leaseMs !== null ? { leaseMs: job.leaseMs } : {}),
      }),
    );
    this.jobs.set(cfg.job, job);
    this.renew(cfg.job);
    this.log(
      `node ${this.name}: hosting job ${cfg.job} stages ${stages.join(',')}${job.leaseMs !== null ? ` (lease ${job.leaseMs} ms)` : ''}`,
    );
    this.reply(req.reply, {
      verb: 'hosting',
      pid: process.pid,
      host: this.machine,
      stages,
      job: cfg.job,
      ...launchField(job.launch),
    });
  }

  private record(jobName: string, job: HostedJob, e: BatonEvent): void {
    const list = job.pending.get(e.stage);
    if (!list) return;
    list.push(e);
    if (list.length >= TRACE_BATCH) this.flushTrace(jobName, job);
    else if (!job.flushTimer) job.flushTimer = setTimeout(() => this.flushTrace(jobName, job), TRACE_FLUSH_MS);
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

  private flushTrace(jobName: string, job: HostedJob): void {
    if (job.flushTimer) clearTimeout(job.flushTimer);
    job.flushTimer = null;
    for (const [stage, list] of job.pending) {
      if (list.length === 0) continue;
      job.pending.set(stage, []);
      this.publishTrace(jobName, stage, job, list);
    }
  }

  /** A batch over the server's max_payload goes out in halves; an event that alone is over
   * it is dropped, logged and reported in the answer to finish. */
  private publishTrace(jobName: string, stage: number, job: HostedJob, list: BatonEvent[]): void {
    try {
      this.bus.publish(subject(jobName, 'trace', stage), encodeValue({ events: list, ...launchField(job.launch) }));
      job.sent.set(stage, (job.sent.get(stage) ?? 0) + list.length);
    } catch (err) {
      if (err instanceof PayloadTooLargeError && list.length > 1) {
        const half = list.length >> 1;
        this.publishTrace(jobName, stage, job, list.slice(0, half));
        this.publishTrace(jobName, stage, job, list.slice(half));
        return;
      }
      const lost = `${list.length} trace event(s) of stage ${stage} lost: ${(err as Error).message}`;
      job.lostTrace.push(lost);
      this.log(`node ${this.name}: job ${jobName}: ${lost}`);
    }
  }

  private teardown(name: string, job: HostedJob): void {
    if (job.flushTimer) clearTimeout(job.flushTimer);
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

/** Longer reply subjects are refused: the server drops a connection whose command line
 * (the subject is in it) passes 4 KB. Launchers use 12 hex digits after the prefix. */
const MAX_REPLY_SUBJECT = 128;

/** Where an agent may answer: a launcher's reply box (a valid subject under baton._nodes.reply.). */
function isReplySubject(to: unknown): to is string {
  if (typeof to !== 'string' || !to.startsWith(`${NODES_PREFIX}.reply.`) || to.length > MAX_REPLY_SUBJECT) return false;
  try {
    checkSubject(to, false);
    return true;
  } catch {
    return false;
  }
}

/**
 * The files on the hosting machine a job config names: a policy module (run), a profile
 * file, a training corpus and, when resuming, a checkpoint directory (read).
 */
export function filesAJobNames(cfg: JobConfig): string[] {
  return [
    ...(typeof cfg.policy === 'string' && isModulePath(cfg.policy) ? [`policy module ${quoteValue(cfg.policy)}`] : []),
    ...(typeof cfg.profile === 'string' && isProfilePath(cfg.profile)
      ? [`profile file ${quoteValue(cfg.profile)}`]
      : []),
    ...(typeof cfg.train?.data === 'string' ? [`corpus file ${quoteValue(cfg.train.data)}`] : []),
    // Stages read a checkpoint only to resume (the launcher writes them).
    ...(typeof cfg.train?.checkpoint === 'string' && cfg.train.startIteration > 0
      ? [`checkpoint directory ${quoteValue(cfg.train.checkpoint)}`]
      : []),
  ];
}

/** Files a launcher names are used on this machine only with --allow-files. */
function refuseFiles(cfg: JobConfig): void {
  const files = filesAJobNames(cfg);
  if (files.length > 0)
    throw new FilesNotAllowedError(
      `host: the job names ${files.join(' and ')}; this agent loads files a launcher names only when started with baton node --allow-files`,
    );
}

function jobName(job: unknown): string {
  if (typeof job !== 'string') throw new Error(`job must be a string, got ${quoteValue(job)}`);
  return job;
}
