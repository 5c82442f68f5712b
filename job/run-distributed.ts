// A job spread over node agents (actors/node-agent.ts) connected by NATS: the launcher
// finds or spawns the nodes, asks each to host its stages, runs the coordinator
// itself, gathers every stage's events from the trace subjects, then validates the run
// exactly as a single-process one.

import { newLaunchId } from '../transport/envelope';
import { Bus, Subscription } from '../transport/bus';
import { decodeValue, encodeValue } from '../transport/codec';
import { peerText, quoteValue } from '../base/quote';
import { MAX_TIMER_MS, RealClock } from '../base/clock';
import { IterationRecord, coordinate } from '../actors/coordinator';
import { DeadlockError } from '../checks/deadlock';
import { BatonEvent, EventSink, eventProblem } from '../stage/events';
import { JobConfig } from './config';
import { JobResult, buildResult, waitWithWatchdog } from './run-local';
import { newRejectTally, tallyReject } from '../base/reject-tally';
import { ANNOUNCE_SUBJECT, MIN_LEASE_MS, NODES_PREFIX, NODE_NAME_RE, nodeSubject } from '../actors/node-agent';
import { ActorRuntime } from '../actors/runtime';
import { StageStatus } from '../stage/stage-logic';
import { JobConfigError, JobError, NodeInputError, planJob } from './wire-stage';
import { requiredReportFields } from '../checks/report-body';

export interface DistributedOptions {
  bus: Bus;
  /** Node agents to use, by name; stages are dealt to them in contiguous blocks. */
  nodes: string[];
  /** How long to wait for nodes to announce themselves and answer, ms. */
  nodeTimeoutMs?: number;
  /** Pause between hosting and the first iteration, so subscriptions spread over a cluster (ms, default 200). */
  settleMs?: number;
  sinks?: EventSink[];
  onIteration?: (r: IterationRecord) => void;
  /** Rejects when the job cannot go on (a stage process died, the launcher was interrupted): the job fails with that error at once. */
  stop?: Promise<never>;
  /** The nodes drop the job's stages when they hear nothing from this launcher for this long, and the
   * launcher fails the job when a node answers nothing for as long (ms; default the job's stall timeout,
   * the same bound on a task that blocks its process); renewed every quarter of it. */
  leaseMs?: number;
}

export interface DistributedResult extends JobResult {
  /** Each node's process: its pid and machine name (pids repeat across machines). */
  nodes: { name: string; pid: number; host: string; stages: number[] }[];
}

type Reply = Record<string, unknown> & { verb: string; name: string };

class ReplyBox {
  readonly queue: Reply[] = [];
  private waiters: (() => void)[] = [];
  private closed = false;
  push(r: Reply): void {
    this.queue.push(r);
    this.wake();
  }
  /** End every wait (the job is over): a wait that lost a race must not keep the process alive. */
  close(): void {
    this.closed = true;
    this.wake();
  }
  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  /** Wait until `pred` holds for the replies so far; returns the matching ones. */
  async waitFor(pred: (rs: Reply[]) => boolean, timeoutMs: number, what: () => string): Promise<Reply[]> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.queue)) {
      if (this.closed) throw new JobError(`gave up waiting for ${what()}: the job ended`);
      const left = deadline - Date.now();
      if (left <= 0) throw new JobError(`timed out after ${timeoutMs} ms waiting for ${what()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.queue;
  }
}

async function pollUntil(pred: () => boolean, timeoutMs: number, over: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (over()) throw new JobError('gave up polling: the job ended');
    if (Date.now() > deadline) throw new JobError(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A field of a node's reply, for an error message (a string as it is, anything else quoted). */
const text = (x: unknown): string => peerText(x, 2000);

function decodeReply(data: Uint8Array): Reply | null {
  try {
    const v = decodeValue(data) as Reply;
    return v && typeof v === 'object' && typeof v.verb === 'string' && typeof v.name === 'string' ? v : null;
  } catch {
    return null;
  }
}

const isCount = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0;
const isCountOrNull = (x: unknown): boolean => x === null || Number.isSafeInteger(x);
const isTexts = (x: unknown): boolean => Array.isArray(x) && x.every((t) => typeof t === 'string');
const STATUS_FIELDS: readonly (readonly [string, (x: unknown) => boolean])[] = [
  ['stage', isCount],
  ['iteration', isCountOrNull],
  ['running', (x) => x === null || typeof x === 'string'],
  ['remaining', isCount],
  ['inflight', isCount],
  ['forwardReady', isTexts],
  ['backwardReady', isTexts],
  ['weightReady', isTexts],
  ['waitingFor', isTexts],
  ['idleSince', (x) => x === null || (typeof x === 'number' && Number.isFinite(x))],
  // Absent from the statuses of earlier agents.
  ['held', (x) => x === undefined || isCount(x)],
  ['heldIteration', (x) => x === undefined || isCountOrNull(x)],
];

/**
 * What is wrong with the fields of a node's reply that the launcher reads (the counts and
 * lists of `finished`, the stage statuses of `status`), or null. The launcher reads them
 * without further checks, so a malformed one is refused, and a well-formed one can still come.
 */
export function replyProblem(r: Reply): string | null {
  if (r.verb === 'finished') {
    const events = r.events;
    if (events === null || typeof events !== 'object' || Array.isArray(events) || ArrayBuffer.isView(events))
      return `its events must be a map of stage to count, got ${quoteValue(events)}`;
    for (const [s, n] of Object.entries(events))
      if (!/^(0|[1-9][0-9]*)$/.test(s) || !isCount(n))
        return `its events must be a map of stage to count, got ${quoteValue(events)}`;
    for (const k of ['failures', 'lostTrace'])
      if (r[k] !== undefined && !isTexts(r[k])) return `its ${k} must be a list of strings, got ${quoteValue(r[k])}`;
  } else if (r.verb === 'status') {
    if (!Array.isArray(r.statuses)) return `its statuses must be a list, got ${quoteValue(r.statuses)}`;
    for (const st of r.statuses) {
      if (st === null || typeof st !== 'object' || Array.isArray(st))
        return `a stage status must be a map, got ${quoteValue(st)}`;
      const bad = STATUS_FIELDS.find(([k, ok]) => !ok((st as Record<string, unknown>)[k]));
      if (bad) return `a stage status's ${bad[0]} is ${quoteValue((st as Record<string, unknown>)[bad[0]])}`;
    }
  }
  return null;
}

/** Contiguous blocks of stages per node: P=8 over 3 nodes gives 0-2, 3-5, 6-7. */
export function assignStages(stages: number, nodes: number): number[][] {
  const out: number[][] = Array.from({ length: nodes }, () => []);
  for (let s = 0; s < stages; s++) out[Math.floor((s * nodes) / stages)].push(s);
  return out.filter((b) => b.length > 0);
}

export async function runDistributed(cfg: JobConfig, o: DistributedOptions): Promise<DistributedResult> {
  const wallStart = performance.now();
  const { policy, shape } = planJob(cfg);
  for (const n of o.nodes)
    if (!NODE_NAME_RE.test(n)) throw new JobError(`node name ${JSON.stringify(n)} does not match [A-Za-z0-9_-]+`);
  const leaseMs = Math.max(MIN_LEASE_MS, Math.round(o.leaseMs ?? cfg.stallTimeoutMs));
  if (!(leaseMs <= MAX_TIMER_MS))
    throw new JobConfigError(
      `the lease (by default the stall timeout) is ${leaseMs} ms; it must be at most ${MAX_TIMER_MS} ms, the longest timer Node keeps`,
    );
  const bus = o.bus;
  const timeout = o.nodeTimeoutMs ?? 20000;
  // This run's id: on every message of the job, so stages and the coordinator refuse what a
  // stage process of an earlier run of the same job name (its launcher killed mid-task) sends.
  const launch = newLaunchId();
  const replySubject = `${NODES_PREFIX}.reply.${launch}`;
  const replies = new ReplyBox();
  const hellos = new ReplyBox();
  const events: BatonEvent[] = [];
  const received = new Map<number, number>();
  const subs: Subscription[] = [];
  const traceRejects = newRejectTally();
  /** What came on the job's trace subjects that is not a trace batch of this launch (one of
   * another launch of the job name, or anything a peer sent), and malformed replies: left out and counted. */
  const otherLaunch = newRejectTally();
  let nodeFailed: (e: Error) => void = () => {};
  const nodeFailure = new Promise<never>((_, reject) => (nodeFailed = reject));
  nodeFailure.catch(() => {});
  o.stop?.catch((e: Error) => nodeFailed(e));
  /** `p`, unless the job fails first. */
  const unlessFailed = <T>(p: Promise<T>): Promise<T> => Promise.race([nodeFailure, p]);
  const heard = new Map<string, number>();
  subs.push(
    bus.subscribe(replySubject, (subj, d) => {
      const r = decodeReply(d);
      if (!r) return;
      const problem = replyProblem(r);
      if (problem !== null) {
        tallyReject(
          otherLaunch,
          `${quoteValue(subj, 200)}: a ${peerText(r.verb, 40)} reply from node ${peerText(r.name, 200)} refused: ${problem}`,
        );
        return;
      }
      heard.set(r.name, Date.now());
      if (r.verb === 'failure')
        nodeFailed(new JobError(`on node ${r.name}, actor ${text(r.actor)} failed: ${text(r.message)}`));
      if (r.verb === 'leaving') nodeFailed(new JobError(`node ${r.name} left during the job (${text(r.reason)})`));
      // Waiting out a lease would only blame a live node for a job it no longer has.
      if (
        r.verb === 'error' &&
        (r.request === 'renew' || r.request === 'status') &&
        o.nodes.includes(r.name) &&
        (r.error === 'JobNotHostedError' || r.error === 'LaunchMismatchError')
      )
        nodeFailed(new JobError(`node ${r.name} no longer hosts job ${cfg.job}: ${text(r.message)}`));
      if (r.verb === 'renewed') return;
      replies.push(r);
    }),
  );
  subs.push(
    bus.subscribe(ANNOUNCE_SUBJECT, (_s, d) => {
      const r = decodeReply(d);
      if (r && r.verb === 'hello') hellos.push(r);
    }),
  );
  // The wildcard's last token is whatever a publisher chose: quoted wherever it is printed.
  // Only a batch that carries this launch's id and is malformed fails the run (its trace
  // would be incomplete); whatever else a peer puts on the subjects is counted and left out.
  subs.push(
    bus.subscribe(`baton.${cfg.job}.trace.*`, (subj, d) => {
      const where = quoteValue(subj, 200);
      let v: { events?: unknown[]; launch?: unknown };
      try {
        const x = decodeValue(d);
        if (typeof x !== 'object' || x === null || Array.isArray(x)) {
          tallyReject(
            otherLaunch,
            `${where}: not a trace batch (a map with this run's launch id), got ${quoteValue(x)}`,
          );
          return;
        }
        v = x as typeof v;
      } catch (err) {
        tallyReject(otherLaunch, `${where}: not a trace batch: ${(err as Error).message}`);
        return;
      }
      if (v.launch !== launch) {
        tallyReject(
          otherLaunch,
          `${where}: trace batch of launch ${quoteValue(v.launch)}, this is launch ${launch}: left by an earlier run of the same job name?`,
        );
        return;
      }
      try {
        if (!Array.isArray(v.events)) throw new Error('trace batch without an events list');
        const stage = subj.slice(subj.lastIndexOf('.') + 1);
        if (!/^(0|[1-9][0-9]*)$/.test(stage) || Number(stage) >= shape.stages)
          throw new Error(`trace subject of no stage of this job (0..${shape.stages - 1})`);
        v.events.forEach((x, i) => {
          const problem =
            eventProblem(x) ??
            (String((x as BatonEvent).stage) !== stage
              ? `an event of stage ${(x as BatonEvent).stage} on stage ${stage}'s subject`
              : null);
          if (problem) {
            tallyReject(traceRejects, `${where}: event ${i}: ${problem}`);
            return;
          }
          const e = x as BatonEvent;
          events.push(e);
          received.set(e.stage, (received.get(e.stage) ?? 0) + 1);
          for (const s of o.sinks ?? []) s(e);
        });
      } catch (err) {
        tallyReject(traceRejects, `${where}: ${(err as Error).message}`);
      }
    }),
  );
  const runtime = new ActorRuntime(new RealClock(), `launcher-${cfg.job}`);
  // The launcher's own actor (the coordinator, whose onIteration writes checkpoints) failing ends the job too.
  runtime.onFailure = (f) =>
    nodeFailed(new JobError(`actor ${f.actor} failed: ${f.error.message}`, { cause: f.error }));
  const request = (node: string, body: Record<string, unknown>) =>
    bus.publish(nodeSubject(node), encodeValue({ ...body, reply: replySubject }));
  const blocks = assignStages(shape.stages, o.nodes.length);
  const used = o.nodes.slice(0, blocks.length);
  let completed = false;
  let over = false;
  let renewer: NodeJS.Timeout | undefined;
  try {
    // Nodes we spawned announce themselves when they start; running ones answer a ping.
    await bus.flush();
    // Over a cluster, a node's interest reaches our server after a delay: ping until it answers.
    const pinger: NodeJS.Timeout = setInterval(
      () => used.filter((n) => !hellos.queue.some((r) => r.name === n)).forEach((n) => request(n, { verb: 'ping' })),
      300,
    );
    let seen: Reply[];
    try {
      used.forEach((n) => request(n, { verb: 'ping' }));
      seen = await unlessFailed(
        hellos.waitFor(
          (rs) => used.every((n) => rs.some((r) => r.name === n)),
          timeout,
          () =>
            `node agents ${used.filter((n) => !hellos.queue.some((r) => r.name === n)).join(', ')} to announce themselves`,
        ),
      );
    } finally {
      clearInterval(pinger);
    }
    const pidOf = new Map(seen.map((r) => [r.name, Number(r.pid)]));
    const hostOf = new Map(seen.map((r) => [r.name, peerText(r.host, 200)]));
    used.forEach((n, i) => request(n, { verb: 'host', config: cfg, stages: blocks[i], leaseMs, launch }));
    const since = Date.now();
    // A node that answers nothing for a whole lease (its renewals included) is gone or hung;
    // it would have dropped the job's stages by now anyway.
    renewer = setInterval(() => {
      used.forEach((n) => request(n, { verb: 'renew', job: cfg.job, launch }));
      const silent = used.filter((n) => Date.now() - (heard.get(n) ?? since) > leaseMs);
      if (silent.length > 0)
        nodeFailed(new JobError(`node(s) ${silent.join(', ')} answered nothing for ${leaseMs} ms: gone or hung`));
    }, leaseMs / 4);
    const hosted = await unlessFailed(
      replies.waitFor(
        (rs) =>
          rs.some((r) => r.verb === 'error') || used.every((n) => rs.some((r) => r.name === n && r.verb === 'hosting')),
        timeout,
        () => `nodes to host job ${cfg.job}`,
      ),
    );
    const failed = hosted.find((r) => r.verb === 'error');
    if (failed) {
      const message = `node ${failed.name} refused to host: ${text(failed.message)}`;
      throw failed.input === true ? new NodeInputError(message) : new JobError(message);
    }
    // An agent that did not take the launch id would send what this run's coordinator refuses.
    for (const r of hosted) if (r.verb === 'hosting' && r.host !== undefined) hostOf.set(r.name, peerText(r.host, 200));
    const unlaunched = hosted.filter((r) => r.verb === 'hosting' && r.launch !== launch).map((r) => peerText(r.name));
    if (unlaunched.length > 0)
      throw new JobError(
        `node(s) ${unlaunched.join(', ')} hosted the job without taking its launch id: an agent older than this launcher? Restart it from the same Baton`,
      );
    // The stages' new subscriptions must reach every server of a cluster before traffic starts.
    await new Promise((r) => setTimeout(r, o.settleMs ?? 200));

    const coordinator = coordinate({
      runtime,
      bus,
      job: cfg.job,
      stages: shape.stages,
      microbatches: shape.microbatches,
      iterations: cfg.warmupIterations + cfg.iterations,
      firstIteration: cfg.firstIteration,
      onIteration: o.onIteration,
      launch,
      reportFields: (st) => requiredReportFields(cfg, st),
    });
    subs.push({ unsubscribe: coordinator.unsubscribe });
    let records: IterationRecord[] | null = null;
    const finished = coordinator.done.then((r) => {
      records = r;
    });
    await bus.flush();
    coordinator.begin();
    await waitWithWatchdog(
      unlessFailed(finished),
      () => events.length,
      cfg.stallTimeoutMs,
      async () => {
        const asked = Date.now();
        used.forEach((n) => request(n, { verb: 'status', job: cfg.job, launch }));
        const answered = (rs: Reply[]) => used.filter((n) => rs.some((r) => r.name === n && r.verb === 'status'));
        const st = await replies
          .waitFor(
            (rs) => answered(rs).length === used.length,
            5000,
            () => 'stage statuses',
          )
          .catch(() => replies.queue);
        const statuses = st.filter((r) => r.verb === 'status').flatMap((r) => r.statuses as StageStatus[]);
        const silent = used.filter((n) => !answered(st).includes(n));
        // A node that said nothing at all since it was asked is the likelier cause than a
        // deadlock; one that answered something else (an error: its status did not fit in a
        // message, say) is alive, and the deadlock report stands.
        const gone = silent.filter((n) => (heard.get(n) ?? 0) < asked);
        if (gone.length > 0)
          return new JobError(
            `node(s) ${gone.join(', ')} answered nothing within 5 s after the job made no progress for ${cfg.stallTimeoutMs} ms: gone or hung`,
          );
        const err = new DeadlockError(statuses, events.slice(-40), performance.now() - wallStart);
        if (silent.length > 0)
          err.message += `\n  node(s) ${silent.join(', ')} answered but gave no status: ${
            st
              .filter((r) => silent.includes(String(r.name)) && r.verb === 'error')
              .map((r) => quoteValue(r.message))
              .join('; ') || 'no reason given'
          }`;
        return err;
      },
    );
    // Renewals end here: an agent answers one that crosses finish with an error (the job is gone).
    clearInterval(renewer);
    const finishAsked = replies.queue.length;
    used.forEach((n) => request(n, { verb: 'finish', job: cfg.job, launch }));
    // An error to finish (or one too big an answer left without a request) ends the wait: no finished will follow.
    const finishError = (rs: Reply[]) =>
      rs
        .slice(finishAsked)
        .find(
          (r) => r.verb === 'error' && used.includes(r.name) && (r.request === 'finish' || r.request === undefined),
        );
    const done = await unlessFailed(
      replies.waitFor(
        (rs) =>
          finishError(rs) !== undefined || used.every((n) => rs.some((r) => r.name === n && r.verb === 'finished')),
        timeout,
        () => 'nodes to finish',
      ),
    );
    const refusedFinish = finishError(done);
    if (refusedFinish)
      throw new JobError(`node ${refusedFinish.name} could not finish job ${cfg.job}: ${text(refusedFinish.message)}`);
    const expected = new Map<number, number>();
    const failures: string[] = [];
    const lost: string[] = [];
    for (const r of done.filter((x) => x.verb === 'finished')) {
      for (const [s, n] of Object.entries(r.events as Record<string, number>)) expected.set(Number(s), n);
      // Loops, not push(...list): a peer's list may be longer than a call takes arguments.
      for (const f of (r.failures as string[] | undefined) ?? []) failures.push(f);
      for (const l of (r.lostTrace as string[] | undefined) ?? []) lost.push(`node ${r.name}: ${l}`);
    }
    if (failures.length > 0) throw new JobError(`actor failures on the nodes: ${failures.slice(0, 5).join('; ')}`);
    if (lost.length > 0) throw new JobError(`the trace is incomplete: ${lost.slice(0, 3).join('; ')}`);
    await unlessFailed(
      pollUntil(
        () => [...expected].every(([s, n]) => (received.get(s) ?? 0) >= n),
        timeout,
        () => over,
      ).catch(() => {
        throw new JobError(
          `trace incomplete: expected ${JSON.stringify(Object.fromEntries(expected))} events per stage, received ${JSON.stringify(Object.fromEntries(received))}`,
        );
      }),
    );
    if (traceRejects.count > 0)
      throw new JobError(
        `malformed trace batches (${traceRejects.count} problems): ${traceRejects.first.slice(0, 3).join('; ')}`,
      );
    events.sort((a, b) => a.t - b.t);
    const result = buildResult({
      cfg,
      shape,
      policy,
      records: records as unknown as IterationRecord[],
      events,
      clock: 'real',
      transport: bus.kind,
      wallStart,
      validate: true,
      sharedClock: false,
      coordinatorRejects: coordinator.rejects,
      launcherRejects: otherLaunch,
    });
    completed = true;
    return {
      ...result,
      nodes: used.map((n, i) => ({ name: n, pid: pidOf.get(n) ?? -1, host: hostOf.get(n) ?? '?', stages: blocks[i] })),
    };
  } finally {
    over = true;
    clearInterval(renewer);
    replies.close();
    hellos.close();
    // A node that refused to host (the job name is someone else's there) is left alone.
    const refused = new Set(replies.queue.filter((r) => r.verb === 'error' && r.request === 'host').map((r) => r.name));
    if (!completed)
      used.filter((n) => !refused.has(n)).forEach((n) => request(n, { verb: 'abort', job: cfg.job, launch }));
    for (const s of subs) s.unsubscribe();
    runtime.shutdown();
  }
}
