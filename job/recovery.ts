// Recovery of a synchronous job over NATS by rolling back to the iteration's start and
// replaying it. In sync mode parameters change only at the flush, so an iteration that
// lost a stage can be replayed exactly: the result is bitwise that of a fault-free run.
//
// Every stage sends its state (parameters and AdamW moments) after every N-th flush's
// report (--state-every N); the launcher keeps the newest ones (job/state-keeper.ts). When
// the iteration under way is lost (a stage process died or stopped beating, the launcher's connection to NATS
// dropped, or someone called Launch.replayIteration: lost messages), this launch ends
// (after a drop, once the connection is back; the nodes' agents reconnect on their own and
// drop what they hosted, and the next launch pings them until they answer): its nodes drop the job, with
// every partial work of the iteration (gradient sums, buffers, kept tapes); the lost
// process is killed if it is still there and started again; and a new launch (a new launch
// id, so every message of the old one still in flight is refused and counted) hosts the
// stages again from the newest kept states, the coordinator beginning at the iteration after
// them (the job's start when none are kept), so up to N iterations are replayed. Past
// maxRestarts the job fails naming every failure.
//
// Asynchronous mode has no flush to roll back to: its stages resume from their snapshots
// (job/async-recovery.ts), losing updates. Not handled: tensor- or data-parallel jobs, and
// node agents this launcher did not start (--nodes): a loss fails those as before.

import { IterationRecord } from '../actors/coordinator';
import { BatonEvent } from '../stage/events';
import { JobConfig } from './config';
import { Launch } from './distributed-launch';
import { DistributedOptions, RecoveryOptions, RecoveryRecord } from './distributed-options';
import { IterationLostError, RestartsExhaustedError } from './recovery-errors';
import { HostRecovery } from './stage-recovery';
import { StateKeeper } from './state-keeper';
import { SnapshotKeeper } from './snapshot-keeper';
import { asyncRecovery, backwardsPerStage } from './async-recovery';
import { newRejectTally, tallyReject } from '../base/reject-tally';
import { Spread, spread } from '../checks/stats';

/** How long a launcher that lost its NATS server waits for it to come back before the job fails. */
const RECONNECT_WAIT_MS = 60_000;
/** How long the launcher waits for the surviving stages of an asynchronous job to send their state as the job is dropped. */
const LAST_SNAPSHOTS_MS = 3000;

/** Whether a job can be recovered by replaying an iteration. */
export function recoverable(cfg: JobConfig): boolean {
  // Asynchronous: real compute with snapshots (emulated stages have no state, and their runs time the pipeline).
  const mode = cfg.mode === 'sync' || (cfg.train !== null && cfg.async.snapshotEvery > 0);
  return mode && (cfg.tp ?? 1) === 1 && (cfg.dp ?? 1) === 1;
}

/** The job from iteration `next` on (the same end); the job itself when `next` is its start. */
export function resumedConfig(cfg: JobConfig, next: number): JobConfig {
  if (next === cfg.firstIteration) return cfg;
  const end = cfg.firstIteration + cfg.warmupIterations + cfg.iterations;
  const warmup = Math.max(0, cfg.firstIteration + cfg.warmupIterations - next);
  return {
    ...cfg,
    firstIteration: next,
    warmupIterations: warmup,
    iterations: end - next - warmup,
    // The states come in the host request; a checkpoint is read only to start the whole job.
    train: cfg.train && { ...cfg.train, startIteration: next, checkpoint: null },
  };
}

/** What the attempts of a job have done so far: the iterations flushed, their events, the failures. */
export class Attempts {
  /** The config of the attempt to come, and what its stages start from. */
  cfg: JobConfig;
  hostRecovery: HostRecovery;
  readonly records: IterationRecord[] = [];
  readonly events: BatonEvent[] = [];
  readonly recoveries: RecoveryRecord[] = [];
  /** State messages refused (not this launch's, not a snapshot), and the rejects of the attempts that failed. */
  readonly rejects = newRejectTally();
  readonly keeper: StateKeeper | null;
  /** Asynchronous mode: each stage's newest snapshot. */
  readonly snapshots: SnapshotKeeper | null;
  private readonly r: RecoveryOptions;
  private current: Launch | null = null;

  constructor(
    private readonly job: JobConfig,
    o: DistributedOptions & { recovery: RecoveryOptions },
  ) {
    this.cfg = job;
    this.r = o.recovery;
    // Emulated stages hold no state: the iteration under way is replayed as is.
    const sync = job.mode === 'sync';
    this.hostRecovery = { stateEvery: job.train === null ? 0 : sync ? o.recovery.stateEvery : job.async.snapshotEvery };
    this.keeper = job.train && sync ? new StateKeeper(o.bus, job.job, job.stages, this.rejects) : null;
    this.snapshots = job.train && !sync ? new SnapshotKeeper(o.bus, job.job, job.stages, this.rejects) : null;
    this.r.onExit((name, why) =>
      this.current?.replayIteration(`stage process ${name} ended during the job (${why})`, name),
    );
    this.r.connection?.onDrop((why) =>
      this.current?.replayIteration(`${why.message}: what was in flight is lost`, null),
    );
  }

  /** A new attempt begins with `launch`. */
  follow(launch: Launch): void {
    this.current = launch;
    this.keeper?.follow(launch.id);
    this.snapshots?.follow(launch.id);
  }

  /** The attempt that ended with `err`: recover (restart, roll back) or rethrow when it is not a loss or too many came. */
  async recover(launch: Launch, err: unknown, stagesOf: (node: string) => number[]): Promise<void> {
    this.stampResume(launch);
    if (!(err instanceof IterationLostError)) throw err;
    // Lost while the final reports were collected (every iteration done): the last one is
    // replayed, so that the job ends with its reports.
    const end = this.job.firstIteration + this.job.warmupIterations + this.job.iterations;
    const iteration = Math.min(launch.nextIteration(), end - 1);
    if (this.recoveries.length >= this.r.maxRestarts) {
      const all = [
        ...this.recoveries.map((x) => `iteration ${x.iteration}: ${x.reason}`),
        `iteration ${iteration}: ${err.message}`,
      ];
      throw new RestartsExhaustedError(
        `${all.length} failure(s), more than --max-restarts ${this.r.maxRestarts} allows: ${all.join('; ')}`,
        { cause: err },
      );
    }
    if (this.snapshots) return this.recoverAsync(launch, err, stagesOf);
    this.keep(launch, iteration);
    // Closing sends the nodes their aborts, which nats.js drops while the connection is down:
    // an agent that kept its connection would otherwise hold the old job for its lease.
    await this.r.connection?.up(RECONNECT_WAIT_MS);
    launch.close();
    if (err.node !== null) await this.r.restart(err.node);
    const point = this.keeper?.resumePoint(iteration) ?? null;
    // Emulated stages: nothing to restore, the iteration under way starts again.
    const next = this.keeper ? (point?.next ?? this.job.firstIteration) : iteration;
    this.keeper?.dropFrom(next);
    this.cut(next);
    this.cfg = resumedConfig(this.job, next);
    this.hostRecovery = {
      stateEvery: this.hostRecovery.stateEvery,
      ...(point && next > this.job.firstIteration
        ? { resume: Object.fromEntries(point.states.map((st, s) => [String(s), st])) }
        : {}),
    };
    this.recoveries.push({
      failed: err.node,
      stages: err.node !== null ? stagesOf(err.node) : [],
      reason: err.message,
      iteration,
      resumed_from: next,
      iterations_replayed: iteration - next + 1,
      detected_at: err.detectedAt,
      resumed_at: 0,
      recovery_ms: 0,
    });
  }

  /** Asynchronous mode: every stage resumes from its newest snapshot (job/async-recovery.ts). */
  private async recoverAsync(
    launch: Launch,
    err: IterationLostError,
    stagesOf: (node: string) => number[],
  ): Promise<void> {
    const keeper = this.snapshots!;
    this.keep(launch, this.job.firstIteration);
    await this.r.connection?.up(RECONNECT_WAIT_MS);
    launch.close();
    // The surviving stages send their state as it is as their job is dropped: they resume from it.
    const lost = err.node !== null ? stagesOf(err.node) : [];
    const survivors = Array.from({ length: this.job.stages }, (_, s) => s).filter((s) => !lost.includes(s));
    await keeper.lastOf(survivors, LAST_SNAPSHOTS_MS);
    // What the failed launch sends from now on is not taken: the plan is over the snapshots kept so far.
    keeper.follow(undefined);
    if (err.node !== null) await this.r.restart(err.node);
    const seen = backwardsPerStage(launch.trace.events, this.job.stages);
    const r = asyncRecovery(this.job, keeper, err, lost, seen);
    this.cfg = r.cfg;
    this.hostRecovery = r.hostRecovery;
    this.recoveries.push(r.record);
  }

  /** The attempt's flushed iterations and their events join the job's. */
  keep(launch: Launch, before: number): void {
    for (const d of launch.otherLaunch.first) tallyReject(this.rejects, d);
    this.rejects.count += launch.otherLaunch.count - launch.otherLaunch.first.length;
    for (const r of launch.records) if (r.iteration < before) this.records.push(r);
    for (const e of launch.trace.events) if (e.iteration < before) this.events.push(e);
    if (this.keeper) for (const r of launch.records) this.keeper.fromRecord(r);
  }

  /** Forget what a replay from `next` makes again. */
  private cut(next: number): void {
    const keepRec = this.records.filter((r) => r.iteration < next);
    this.records.splice(0, this.records.length, ...keepRec);
    const keepEv = this.events.filter((e) => e.iteration < next);
    this.events.splice(0, this.events.length, ...keepEv);
  }

  /** The last recovery's training resumed when `launch` began its first iteration. */
  stampResume(launch: Launch): void {
    const last = this.recoveries[this.recoveries.length - 1];
    if (last && last.resumed_at === 0 && launch.beganAt > 0) {
      last.resumed_at = launch.beganAt;
      last.recovery_ms = launch.beganAt - last.detected_at;
    }
  }

  /** What keeping the stages' state cost: the messages, their bytes, and (asynchronous) each snapshot's copy. */
  keptState(): { messages: number; bytes: number; copy_ms?: Spread } | undefined {
    if (this.keeper) return { messages: this.keeper.taken, bytes: this.keeper.bytes };
    if (!this.snapshots) return undefined;
    const { taken, bytes, copyMs } = this.snapshots;
    if (copyMs.length === 0) return { messages: taken, bytes };
    const round = (x: number) => Math.round(x * 1000) / 1000;
    const s = spread(copyMs);
    return { messages: taken, bytes, copy_ms: { median: round(s.median), min: round(s.min), max: round(s.max) } };
  }

  close(): void {
    this.keeper?.close();
    this.snapshots?.close();
  }
}
