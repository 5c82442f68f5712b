// One launch of a distributed job (job/run-distributed.ts): its requests to the node
// agents and their replies, its lease renewals, its coordinator, its trace, its end.

import { newLaunchId } from '../transport/envelope';
import { AuthBus } from '../transport/auth-bus';
import { senderChecked } from '../transport/auth-sender';
import { Bus, Subscription } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { peerText, quoteValue } from '../base/quote';
import { RealClock } from '../base/clock';
import { IterationRecord, coordinate } from '../actors/coordinator';
import { failureSignal } from '../base/failure-signal';
import { JobConfig } from './config';
import { waitWithWatchdog } from './run-local';
import { newRejectTally, tallyReject } from '../base/reject-tally';
import { NodeSubjects, STANDALONE_NODES, replyBox } from '../actors/node-agent';
import { ActorRuntime } from '../actors/runtime';
import { JobError } from './wire-stage';
import { requiredReportFields } from '../checks/report-body';
import { Reply, ReplyBox, decodeReply, text } from './reply-box';
import { replyProblem } from './node-replies';
import { TraceCollector } from './trace-collector';
import { expectedEvents, stallErrorOf, wholeTrace } from './launch-ends';
import { DistributedOptions, DistributedResult, NodeBlock, assignBlocks } from './distributed-options';
import { HeartbeatMonitor } from './heartbeat';
import { HEARTBEAT_DEFAULTS } from './defaults';
import { IterationLostError } from './recovery-errors';
import { HostRecovery, recoveryForStages } from './stage-recovery';
import { hostingProblem, launchSenderProblem, replyFailure } from './launch-checks';

/** One launch of a distributed job: its node replies, its trace, its renewals, its end. */
export class Launch {
  // This run's id: on every message of the job, so stages and the coordinator refuse what a
  // stage process of an earlier run of the same job name (its launcher killed mid-task) sends.
  readonly id = newLaunchId();
  private readonly replySubject: string;
  /** Where its nodes are reached: the shared subjects of standalone agents, or the job's own. */
  private readonly at: NodeSubjects;
  private readonly replies = new ReplyBox();
  private readonly hellos = new ReplyBox();
  private readonly subs: Subscription[] = [];
  /** What came on the job's trace subjects that is not a trace batch of this launch (one of
   * another launch of the job name, or anything a peer sent), and malformed replies: left out and counted. */
  readonly otherLaunch = newRejectTally();
  readonly trace: TraceCollector;
  private readonly heard = new Map<string, number>();
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
    this.replySubject = replyBox(cfg.job, this.id);
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
    this.subs.push(
      this.bus.subscribe(this.replySubject, (subj, d) => this.onReply(subj, d)),
      this.bus.subscribe(this.at.announce, (_s, d) => {
        const r = decodeReply(d);
        if (r && r.verb === 'hello') this.hellos.push(r);
      }),
      this.trace.subscribe(this.bus),
    );
    this.runtime = new ActorRuntime(new RealClock(), `launcher-${cfg.job}`);
    // The launcher's own actor (the coordinator, whose onIteration writes checkpoints) failing ends the job too.
    this.runtime.onFailure = (f) =>
      this.nodeFailed(new JobError(`actor ${f.actor} failed: ${f.error.message}`, { cause: f.error }));
    this.beats = new HeartbeatMonitor(this.bus, this.used, (n) => this.heard.set(n, Date.now()), this.at);
  }

  /** Only the job's agents send to the launcher, and a stage's trace comes from the agent hosting it. */
  private senderProblem(subj: string, sender: string): string | null {
    return launchSenderProblem({ at: this.at, nodes: this.o.nodes, blocks: this.blocks }, subj, sender);
  }

  /** `p`, unless the job fails first. */
  private unlessFailed<T>(p: Promise<T>): Promise<T> {
    return Promise.race([this.nodeFailure, p]);
  }

  private request(node: string, body: Record<string, unknown>): void {
    this.bus.publish(this.at.request(node), encodeValue({ ...body, reply: this.replySubject }));
  }

  private onReply(subj: string, d: Uint8Array): void {
    const r = decodeReply(d);
    if (!r) return;
    const problem = replyProblem(r);
    if (problem !== null) {
      tallyReject(
        this.otherLaunch,
        `${quoteValue(subj, 200)}: a ${peerText(r.verb, 40)} reply from node ${peerText(r.name, 200)} refused: ${problem}`,
      );
      return;
    }
    this.heard.set(r.name, Date.now());
    const failure = replyFailure(r, this.cfg.job, this.o.nodes);
    if (failure) this.nodeFailed(failure);
    if (r.verb === 'renewed') return;
    this.replies.push(r);
  }

  /** Every node used has said hello: nodes we spawned announce themselves when they start;
   * running ones answer a ping (over a cluster, after a delay: pinged until they answer). */
  async announced(): Promise<void> {
    await this.bus.flush();
    const missing = () => this.used.filter((n) => !this.hellos.queue.some((r) => r.name === n));
    const pinger: NodeJS.Timeout = setInterval(() => missing().forEach((n) => this.request(n, { verb: 'ping' })), 300);
    let seen: Reply[];
    try {
      this.used.forEach((n) => this.request(n, { verb: 'ping' }));
      seen = await this.unlessFailed(
        this.hellos.waitFor(
          (rs) => this.used.every((n) => rs.some((r) => r.name === n)),
          this.timeout,
          () => `node agents ${missing().join(', ')} to announce themselves`,
        ),
      );
    } finally {
      clearInterval(pinger);
    }
    this.pidOf = new Map(seen.map((r) => [r.name, Number(r.pid)]));
    this.hostOf = new Map(seen.map((r) => [r.name, peerText(r.host, 200)]));
  }

  /** Each node hosts its block of stages under the lease, renewed from now on. */
  async host(): Promise<void> {
    const { cfg, used, leaseMs } = this;
    used.forEach((n, i) =>
      this.request(n, {
        verb: 'host',
        config: cfg,
        ...this.blocks[i],
        leaseMs,
        launch: this.id,
        ...(this.recovery ? { recovery: recoveryForStages(this.recovery, this.blocks[i].stages) } : {}),
      }),
    );
    const since = Date.now();
    // A node that answers nothing for a whole lease (its renewals included) is gone or hung;
    // it would have dropped the job's stages by now anyway.
    this.renewer = setInterval(() => {
      used.forEach((n) => this.request(n, { verb: 'renew', job: cfg.job, launch: this.id }));
      const silent = used.filter((n) => Date.now() - (this.heard.get(n) ?? since) > leaseMs);
      if (silent.length > 0)
        this.nodeFailed(new JobError(`node(s) ${silent.join(', ')} answered nothing for ${leaseMs} ms: gone or hung`));
    }, leaseMs / 4);
    const hosted = await this.unlessFailed(
      this.replies.waitFor(
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
      // A node inside a long task beats as busy: progress, not a stall.
      () => this.trace.events.length + this.beats.progress(),
      cfg.stallTimeoutMs,
      () => this.stallError(wallStart),
    );
    return { records: records as unknown as IterationRecord[], rejects: coordinator.rejects };
  }

  /** Why the job made no progress: a node gone silent, or a deadlock with every stage's status. */
  private async stallError(wallStart: number): Promise<Error> {
    const { cfg, used } = this;
    const asked = Date.now();
    used.forEach((n) => this.request(n, { verb: 'status', job: cfg.job, launch: this.id }));
    const answered = (rs: Reply[]) => used.filter((n) => rs.some((r) => r.name === n && r.verb === 'status'));
    const st = await this.replies
      .waitFor(
        (rs) => answered(rs).length === used.length,
        5000,
        () => 'stage statuses',
      )
      .catch(() => this.replies.queue);
    const silent = used.filter((n) => !answered(st).includes(n));
    return stallErrorOf({
      answers: st,
      silent,
      // A node that said nothing at all since it was asked is the likelier cause than a deadlock.
      gone: silent.filter((n) => (this.heard.get(n) ?? 0) < asked),
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
    const finishAsked = this.replies.queue.length;
    used.forEach((n) => this.request(n, { verb: 'finish', job: cfg.job, launch: this.id }));
    // An error to finish (or one too big an answer left without a request) ends the wait: no finished will follow.
    const finishError = (rs: Reply[]) =>
      rs
        .slice(finishAsked)
        .find(
          (r) => r.verb === 'error' && used.includes(r.name) && (r.request === 'finish' || r.request === undefined),
        );
    const done = await this.unlessFailed(
      this.replies.waitFor(
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
    this.replies.close();
    this.hellos.close();
    // A node that refused to host (the job name is someone else's there) is left alone.
    const refused = new Set(
      this.replies.queue.filter((r) => r.verb === 'error' && r.request === 'host').map((r) => r.name),
    );
    if (!this.completed)
      this.used
        .filter((n) => !refused.has(n))
        .forEach((n) => this.request(n, { verb: 'abort', job: this.cfg.job, launch: this.id }));
    for (const s of this.subs) s.unsubscribe();
    this.runtime.shutdown();
  }
}
