// The node agent: one nact system in one OS process that hosts stage actors on
// request (what hosting a job's stages means — its config, plan and wiring — is the
// StageHost it is given: job/node-host.ts). Jobs reach it over the bus on `baton._nodes.<name>`
// (an agent started for one job: `baton.<job>.node.<name>`); it announces itself on
// `….announce`, answers on the reply subject a request names (`baton.<job>.node.reply.<id>`), and
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
// and one whose publish or subscription the NATS server refused (node-jobs.ts reportDenial):
//   { verb: 'denied', job, operation: 'publish'|'subscription', subject, message, stages }
// Malformed requests are answered with an error when they name a reply subject, and
// counted and logged otherwise; nothing a peer sends but exit can stop the agent. A job hosted
// with a lease is dropped when no request naming it (the launcher renews every few
// seconds) has come for leaseMs: a launcher that was killed leaves nothing behind.

import * as os from 'os';
import { EXIT_INPUT, exitStatusOf } from '../base/errors';
import { quoteValue } from '../base/quote';
import { Bus, Subscription } from '../transport/bus';
import { decodeValue, encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { AuthBus, AuthRejectReason } from '../transport/auth-bus';
import { parseSubject } from '../transport/subjects';
import { enterTask, leaveTask } from '../base/task-activity';
import {
  HostedJob,
  NodeJobs,
  StartingJob,
  answerJobRequest,
  renewLease,
  reportDenial,
  stopJob,
  wireJob,
} from './node-jobs';
import { answerOn } from './node-reply';
import { StageHost } from './stage-host';
import {
  NodeRequestError,
  NodeSubjects,
  STANDALONE_NODES,
  checkLaneOfPlan,
  hostFields,
  jobName,
  jobNodeSubjects,
} from './node-protocol';

export {
  ANNOUNCE_SUBJECT,
  JobNotHostedError,
  LaunchMismatchError,
  MAX_NODE_NAME,
  MIN_LEASE_MS,
  NODES_PREFIX,
  NODE_NAME_RE,
  NodeSubjects,
  STANDALONE_NODES,
  jobNodeSubjects,
  nodeSubject,
  replyBox,
} from './node-protocol';
export { HostedStage, StageHost, StagePlan } from './stage-host';

export interface NodeAgentOptions {
  name: string;
  bus: Bus;
  /** What hosting a job's stages means (job/node-host.ts). */
  stageHost: StageHost;
  log?: (line: string) => void;
  /** The files and directories (real paths) whose policy modules, profiles, corpora and
   * checkpoints a host request may name (`baton node --allow-files`); default none. */
  allowedFiles?: readonly string[];
  /** The machine name it reports (default os.hostname()): with its pid, what tells its process apart. */
  host?: string;
  /** The one job it serves (`baton node --job`): it is reached on that job's subjects and hosts no other job. */
  job?: string;
}

export class NodeAgent {
  readonly name: string;
  private readonly bus: Bus;
  private readonly jobs = new Map<string, HostedJob>();
  /** Jobs between their host request and their wiring (the backend may be loading), with
   * their launch id and whether an abort (or exit) came meanwhile. */
  private readonly starting = new Map<string, StartingJob>();
  private readonly log: (line: string) => void;
  private readonly allowedFiles: readonly string[];
  private readonly stageHost: StageHost;
  private readonly machine: string;
  private readonly onlyJob: string | undefined;
  /** Where it is reached: the shared subjects, or its one job's (node-protocol.ts). */
  readonly subjects: NodeSubjects;
  /** The jobs as the requests about one job and the leases see them (node-jobs.ts). */
  private readonly desk: NodeJobs;
  private sub: Subscription | null = null;
  private exitResolve: () => void = () => {};
  readonly exited = new Promise<void>((r) => (this.exitResolve = r));
  rejected = 0;

  constructor(o: NodeAgentOptions) {
    this.name = o.name;
    this.bus = o.bus;
    this.log = o.log ?? (() => {});
    this.allowedFiles = o.allowedFiles ?? [];
    this.stageHost = o.stageHost;
    this.machine = o.host ?? os.hostname();
    this.onlyJob = o.job;
    this.subjects = o.job !== undefined ? jobNodeSubjects(o.job) : STANDALONE_NODES;
    this.desk = {
      name: this.name,
      machine: this.machine,
      bus: this.bus,
      jobs: this.jobs,
      starting: this.starting,
      reply: (to, msg) => this.reply(to, msg),
      teardown: (name, job) => this.teardown(name, job),
      log: (line) => this.log(line),
    };
    if (this.bus instanceof AuthBus) this.bus.onReject = (reason, subj, detail) => this.refused(reason, subj, detail);
    // A refusal of the server's permissions (a message that never arrives): its job's launcher fails the job, naming it.
    this.bus.watchDenials?.((d) => reportDenial(this.desk, d));
  }

  /**
   * A message its bus refused (unsealed, sealed under another key, replayed): counted, logged,
   * and a reject event of the job it was for (a request to this agent: of every job it hosts).
   */
  private refused(reason: AuthRejectReason, subj: string, detail: string): void {
    this.rejected++;
    this.log(`node ${this.name}: refused ${detail} on ${quoteValue(subj, 200)} (${reason})`);
    const job = parseSubject(subj)?.job;
    for (const [name, hosted] of this.jobs) {
      if (job !== '_nodes' && job !== name && job !== this.onlyJob) continue;
      const stage = hosted.stages.keys().next().value;
      if (stage === undefined) continue;
      hosted.trace.record({
        type: 'reject',
        t: hosted.runtime.clock.now(),
        stage,
        iteration: -1,
        reason,
        detail: `stage ${stage}: ${quoteValue(subj, 200)}: ${detail} (${reason})`,
      });
    }
  }

  start(): void {
    this.sub = this.bus.subscribe(this.subjects.request(this.name), (_s, data) => this.onRequest(data));
    this.announce();
  }

  /** What it hosts now (its service's STATS carry it: job/node-service.ts). */
  hosting(): { job: string; stages: number[] }[] {
    return [...this.jobs].map(([job, h]) => ({ job, stages: [...h.stages.keys()].sort((a, b) => a - b) }));
  }

  announce(): void {
    this.bus.publish(
      this.subjects.announce,
      encodeValue({ verb: 'hello', name: this.name, pid: process.pid, host: this.machine }),
    );
  }

  /** Answer on a request's reply subject (node-reply.ts); what cannot be answered is counted and logged. */
  private reply(to: unknown, msg: Record<string, unknown>): void {
    answerOn(this.bus, this.name, to, msg, (line) => {
      this.rejected++;
      this.log(line);
    });
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
        // Building a job's stages (a model, a backend) can hold the loop for seconds: busy, not hung.
        enterTask();
        try {
          return await this.host(req);
        } finally {
          leaveTask();
        }
      case 'ping':
        this.announce();
        return;
      case 'renew':
      case 'status':
      case 'finish':
      case 'abort':
        return answerJobRequest(this.desk, req.verb, jobName(req.job), req);
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

  private async host(req: Record<string, unknown>): Promise<void> {
    const { reply, stages, lane, leaseMs, launch } = hostFields(req);
    const plan = this.stageHost(req.config, { allowedFiles: this.allowedFiles, recovery: req.recovery });
    if (this.onlyJob !== undefined && plan.job !== this.onlyJob)
      throw new NodeRequestError(
        `host: this agent serves only job ${this.onlyJob} (baton node --job), not ${plan.job}`,
      );
    if (this.jobs.has(plan.job) || this.starting.has(plan.job))
      throw new NodeRequestError(`job ${plan.job} is already hosted here`);
    for (const s of stages)
      if (s < 0 || s >= plan.stages) throw new NodeRequestError(`host: stage ${s} is outside 0..${plan.stages - 1}`);
    checkLaneOfPlan(plan, lane);
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
    const job = wireJob(this.desk, plan, reply, { stages, lane }, leaseMs ?? null, launch);
    this.jobs.set(plan.job, job);
    renewLease(this.desk, plan.job);
    this.log(
      `node ${this.name}: hosting job ${plan.job} stages ${stages.join(',')}${lane ? ` of rank ${lane.rank}, replica ${lane.replica}` : ''}${job.leaseMs !== null ? ` (lease ${job.leaseMs} ms)` : ''}`,
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

  /** The agent is being stopped: every launcher it hosts stages for hears so at once, and the stages go. */
  leave(reason: string): void {
    // A job still being built is not wired when its build ends.
    for (const starting of this.starting.values()) starting.aborted = reason;
    for (const [name, job] of [...this.jobs]) {
      this.reply(job.replyTo, { verb: 'leaving', job: name, reason });
      this.teardown(name, job);
    }
  }

  private teardown(name: string, job: HostedJob): void {
    stopJob(job);
    this.jobs.delete(name);
  }
}
