// One launch of a distributed job (job/run-distributed.ts): its requests to the node
// agents and their replies (launch-link.ts), its lease renewals (lease-renewal.ts), its
// coordinator, its trace, its end.

import { newLaunchId } from '../transport/envelope';
import { AuthBus } from '../transport/auth-bus';
import { senderChecked } from '../transport/auth-sender';
import { Bus, Subscription } from '../transport/bus';
import { peerText, quoteValue } from '../base/quote';
import { RealClock } from '../base/clock';
import { IterationRecord, coordinate } from '../actors/coordinator';
import { failureSignal } from '../base/failure-signal';
import { JobConfig } from './config';
import { waitWithWatchdog } from './run-local';
import { newRejectTally, tallyReject } from '../base/reject-tally';
import { NodeSubjects, STANDALONE_NODES } from '../actors/node-agent';
import { ActorRuntime } from '../actors/runtime';
import { JobError } from './wire-stage';
import { requiredReportFields } from '../checks/report-body';
import { Reply, text } from './reply-box';
import { TraceCollector } from './trace-collector';
import { expectedEvents, stallErrorOf, wholeTrace } from './launch-ends';
import { DistributedOptions, DistributedResult, NodeBlock, assignBlocks } from './distributed-options';
import { HeartbeatMonitor } from './heartbeat';
import { HEARTBEAT_DEFAULTS } from './defaults';
import { IterationLostError } from './recovery-errors';
import { HostRecovery, recoveryForStages } from './stage-recovery';
import { finishRefusal, hostingProblem, launchSenderProblem } from './launch-checks';
import { LaunchLink } from './launch-link';
import { renewLeases } from './lease-renewal';

/** One launch of a distributed job: its node replies, its trace, its renewals, its end. */
export class Launch {
  // This run's id: on every message of the job, so stages and the coordinator refuse what a
  // stage process of an earlier run of the same job name (its launcher killed mid-task) sends.
  readonly id = newLaunchId();
  /** Where its nodes are reached: the shared subjects of standalone agents, or the job's own. */
  private readonly at: NodeSubjects;
  /** Its requests to the nodes, their replies and hellos. */
  private readonly link: LaunchLink;
  private readonly subs: Subscription[] = [];
  /** What came on the job's trace subjects that is not a trace batch of this launch (one of
   * another launch of the job name, or anything a peer sent), and malformed replies: left out and counted. */
  readonly otherLaunch = newRejectTally();
  readonly trace: TraceCollector;
  private readonly runtime: ActorRuntime;
  private readonly bus: Bus;
  private readonly timeout: number;
  private readonly blocks: NodeBlock[];
  private readonly used: string[];
  private pidOf = new Map<string, number>();
  private hostOf = new Map<string, string>();
  private readonly failure = failureSignal();
  private readonly nodeFailed = this.failure.fail;
  private readonly nodeFailure = this.failure.failed;
  private renewer: NodeJS.Timeout | undefined;
  /** The nodes' heartbeats: a beat is hearing from a node, even one whose loop a task holds. */
  private readonly beats: HeartbeatMonitor;
  completed = false;
  private over = false;
  /** The job config and options this launch runs. */
  get config(): JobConfig {
    return this.cfg;
  }

  get options(): DistributedOptions {
    return this.o;
  }

  /** When the coordinator began the first iteration (Date.now()), 0 before. */
  beganAt = 0;
  /** The iterations this launch completed, in order. */
  readonly records: IterationRecord[] = [];

  constructor(
    private readonly cfg: JobConfig,
    private readonly o: DistributedOptions,
    stages: number,
    private readonly leaseMs: number,
    /** A recoverable job's stages keep sending their state; a replay's start from the states given (job/recovery.ts). */
    private readonly recovery?: HostRecovery,
  ) {
    this.at = o.nodeSubjects ?? STANDALONE_NODES;
    this.blocks = assignBlocks(cfg, o.nodes.length);
    this.used = o.nodes.slice(0, this.blocks.length);
    this.bus = senderChecked(o.bus, (subj, sender) => this.senderProblem(subj, sender));
    if (o.bus instanceof AuthBus)
      o.bus.onReject = (reason, subj, detail) =>
        tallyReject(this.otherLaunch, `${quoteValue(subj, 200)}: refused ${detail} (${reason})`);
    this.timeout = o.nodeTimeoutMs ?? 20000;
    this.trace = new TraceCollector(cfg.job, this.id, stages, o.sinks ?? [], this.otherLaunch);
    o.stop?.catch((e: Error) => this.nodeFailed(e));
    const linked = { job: cfg.job, launch: this.id, nodes: o.nodes, rejects: this.otherLaunch, fail: this.nodeFailed };
    this.link = new LaunchLink(this.bus, this.at, linked);
    this.subs.push(...this.link.subscribe(), this.trace.subscribe(this.bus));
    this.runtime = new ActorRuntime(new RealClock(), `launcher-${cfg.job}`);
    // The launcher's own actor (the coordinator, whose onIteration writes checkpoints) failing ends the job too.
    this.runtime.onFailure = (f) =>
      this.nodeFailed(new JobError(`actor ${f.actor} failed: ${f.error.message}`, { cause: f.error }));
    this.beats = new HeartbeatMonitor(this.bus, this.used, (n) => this.link.heard.set(n, Date.now()), this.at);
  }

  /** Only the job's agents send to the launcher, and a stage's trace comes from the agent hosting it. */
  private senderProblem(subj: string, sender: string): string | null {
    return launchSenderProblem({ at: this.at, nodes: this.o.nodes, blocks: this.blocks }, subj, sender);
  }

  /** `p`, unless the job fails first. */
  private unlessFailed<T>(p: Promise<T>): Promise<T> {
    return Promise.race([this.nodeFailure, p]);
  }

  /** Every node used has said hello (LaunchLink.announced). */
  async announced(): Promise<void> {
    const seen = await this.link.announced(this.used, this.timeout, (p) => this.unlessFailed(p));
    this.pidOf = new Map(seen.map((r) => [r.name, Number(r.pid)]));
    this.hostOf = new Map(seen.map((r) => [r.name, peerText(r.host, 200)]));
  }

  /** Each node hosts its block of stages under the lease, renewed from now on. */
  async host(): Promise<void> {
    const { cfg, used, leaseMs } = this;
    used.forEach((n, i) =>
      this.link.request(n, {
        verb: 'host',
        config: cfg,
        ...this.blocks[i],
        leaseMs,
        launch: this.id,
        ...(this.recovery ? { recovery: recoveryForStages(this.recovery, this.blocks[i].stages) } : {}),
      }),
    );
    const { heard } = this.link;
    const request = (n: string, body: Record<string, unknown>) => this.link.request(n, body);
    this.renewer = renewLeases({ used, job: cfg.job, launch: this.id, leaseMs, heard, request, fail: this.nodeFailed });
    const hosted = await this.unlessFailed(
      this.link.replies.waitFor(
        (rs) =>
          rs.some((r) => r.verb === 'error') || used.every((n) => rs.some((r) => r.name === n && r.verb === 'hosting')),
        this.timeout,
        () => `nodes to host job ${cfg.job}`,
      ),
    );
    const refused = hostingProblem(hosted, this.id);
    if (refused) throw refused;
    for (const r of hosted)
      if (r.verb === 'hosting' && r.host !== undefined) this.hostOf.set(r.name, peerText(r.host, 200));
  }

  /** The iteration under way is lost (a stage process gone, messages lost): it ends this launch, to be replayed. */
  replayIteration(why: string, node: string | null = null): void {
    this.nodeFailed(new IterationLostError(why, node));
  }

  /** The first iteration this launch has not completed. */
  nextIteration(): number {
    return this.cfg.firstIteration + this.records.length;
  }

  /** The coordinator runs every iteration; a stall is reported with the nodes' statuses. */
  async iterate(
    wallStart: number,
  ): Promise<{ records: IterationRecord[]; rejects: ReturnType<typeof newRejectTally> }> {
    const { cfg } = this;
    const coordinator = coordinate({
      runtime: this.runtime,
      bus: this.bus,
      job: cfg.job,
      stages: cfg.stages,
      microbatches: cfg.microbatches,
      iterations: cfg.warmupIterations + cfg.iterations,
      firstIteration: cfg.firstIteration,
      ranks: cfg.tp,
      replicas: cfg.dp,
      onIteration: (r) => {
        this.records.push(r);
        this.o.onIteration?.(r);
      },
      launch: this.id,
      reportFields: (st) => requiredReportFields(cfg, st),
    });
    this.subs.push({ unsubscribe: coordinator.unsubscribe });
    let records: IterationRecord[] | null = null;
    const finished = coordinator.done.then((r) => {
      records = r;
    });
    await this.bus.flush();
    this.beats.watch(Math.min(cfg.stallTimeoutMs, HEARTBEAT_DEFAULTS.timeoutMs), (why, node, at) =>
      this.nodeFailed(new IterationLostError(why, node, at)),
    );
    this.beganAt = Date.now();
    coordinator.begin();
    await waitWithWatchdog(
      this.unlessFailed(finished),
      // Tasks ended, and a node inside a long task (it beats as busy): progress, not a stall.
      // Messages alone are not: a resend loop for a message the server keeps refusing never ends.
      () => this.trace.workDone + this.beats.progress(),
      cfg.stallTimeoutMs,
      () => this.stallError(wallStart),
    );
    return { records: records as unknown as IterationRecord[], rejects: coordinator.rejects };
  }

  /** Why the job made no progress: a node gone silent, or a deadlock with every stage's status. */
  private async stallError(wallStart: number): Promise<Error> {
    const { cfg, used } = this;
    const asked = Date.now();
    used.forEach((n) => this.link.request(n, { verb: 'status', job: cfg.job, launch: this.id }));
    const answered = (rs: Reply[]) => used.filter((n) => rs.some((r) => r.name === n && r.verb === 'status'));
    const st = await this.link.replies
      .waitFor(
        (rs) => answered(rs).length === used.length,
        5000,
        () => 'stage statuses',
      )
      .catch(() => this.link.replies.queue);
    const silent = used.filter((n) => !answered(st).includes(n));
    return stallErrorOf({
      answers: st,
      silent,
      // A node that said nothing at all since it was asked is the likelier cause than a deadlock.
      gone: silent.filter((n) => (this.link.heard.get(n) ?? 0) < asked),
      stallTimeoutMs: cfg.stallTimeoutMs,
      recent: this.trace.events.slice(-40),
      elapsedMs: performance.now() - wallStart,
    });
  }

  /** The nodes stop the job's stages and say how many events each published; all of them arrive. */
  async finish(): Promise<void> {
    const { cfg, used } = this;
    // Renewals end here: an agent answers one that crosses finish with an error (the job is gone).
    clearInterval(this.renewer);
    this.beats.stop();
    const finishAsked = this.link.replies.queue.length;
    used.forEach((n) => this.link.request(n, { verb: 'finish', job: cfg.job, launch: this.id }));
    const finishError = (rs: Reply[]) => finishRefusal(rs, finishAsked, used);
    const done = await this.unlessFailed(
      this.link.replies.waitFor(
        (rs) =>
          finishError(rs) !== undefined || used.every((n) => rs.some((r) => r.name === n && r.verb === 'finished')),
        this.timeout,
        () => 'nodes to finish',
      ),
    );
    const refusedFinish = finishError(done);
    if (refusedFinish)
      throw new JobError(`node ${refusedFinish.name} could not finish job ${cfg.job}: ${text(refusedFinish.message)}`);
    const expected = expectedEvents(done.filter((x) => x.verb === 'finished'));
    await this.unlessFailed(wholeTrace(this.trace, expected, this.timeout, () => this.over));
  }

  /** The machine each stage ran on, as its agent said (the clock its events are on). */
  machineOf(): (stage: number) => string {
    const nodes = this.nodesUsed();
    return (stage) => nodes.find((n) => n.stages.includes(stage))?.host ?? `unknown-${stage}`;
  }

  nodesUsed(): DistributedResult['nodes'] {
    return this.used.map((n, i) => ({
      name: n,
      pid: this.pidOf.get(n) ?? -1,
      host: this.hostOf.get(n) ?? '?',
      stages: this.blocks[i].stages,
    }));
  }

  /** The end, however it came: renewals stop, an unfinished job is aborted on its nodes. */
  close(): void {
    if (this.over) return;
    this.over = true;
    clearInterval(this.renewer);
    this.beats.close();
    this.link.close();
    // A node that refused to host (the job name is someone else's there) is left alone.
    const refused = new Set(
      this.link.replies.queue.filter((r) => r.verb === 'error' && r.request === 'host').map((r) => r.name),
    );
    if (!this.completed)
      this.used
        .filter((n) => !refused.has(n))
        .forEach((n) => this.link.request(n, { verb: 'abort', job: this.cfg.job, launch: this.id }));
    for (const s of this.subs) s.unsubscribe();
    this.runtime.shutdown();
  }
}
