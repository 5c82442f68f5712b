// The launcher's copy of every stage's state as of the last flushes it was sent at, in a
// recoverable job (job/recovery.ts): every --state-every N flushes, a stage sends it on
// baton.<job>.state.<stage> right after its report (actors/sender.ts), so the coordinator
// never waits for it; a report that carries the snapshot anyway (a checkpoint iteration, the
// last one) counts as well. A replay starts from the newest flush whose state every stage
// sent. A state message that is not one of this launch's, or not a stage snapshot, is
// refused and counted.

import type { StageSnapshot } from '../compute/chunk-optimizer';
import { IterationRecord } from '../actors/coordinator';
import { snapshotProblem } from '../checks/report-body';
import { Bus, Subscription } from '../transport/bus';
import { subject } from '../transport/subjects';
import { quoteValue } from '../base/quote';
import { RejectTally, tallyReject } from '../base/reject-tally';
import { stateMessageHead } from './state-message';

/** The newest flush every stage's state is kept for: replay from `next` with `states` (one per stage). */
export interface ResumePoint {
  readonly next: number;
  readonly states: readonly StageSnapshot[];
}

/** How many of the flushes states were sent at are kept: a stage lost between its report and its state leaves the newest one incomplete. */
const KEPT_FLUSHES = 3;

export class StateKeeper {
  private readonly byIteration = new Map<number, (StageSnapshot | undefined)[]>();
  private launch: string | undefined;
  private readonly sub: Subscription;
  /** State messages taken, and their bytes (what keeping the state costs the launcher). */
  taken = 0;
  bytes = 0;

  constructor(
    bus: Bus,
    private readonly job: string,
    private readonly stages: number,
    private readonly rejects: RejectTally,
  ) {
    this.sub = bus.subscribe(subject(job, 'state', '*'), (subj, data) => this.onState(subj, data));
  }

  /** From now on, states of this launch (an attempt of the job) are taken, and only those. */
  follow(launch: string): void {
    this.launch = launch;
  }

  private onState(subj: string, data: Uint8Array): void {
    const refuse = (why: string) => tallyReject(this.rejects, `${quoteValue(subj, 200)}: state refused: ${why}`);
    const head = stateMessageHead(subj, data, {
      job: this.job,
      launch: this.launch,
      stages: this.stages,
      noLaunch: 'one keeping states',
    });
    if (typeof head === 'string') return refuse(head);
    const { v, stage } = head;
    const iteration = v.iteration;
    if (!Number.isInteger(iteration) || (iteration as number) < 0)
      return refuse(`iteration ${quoteValue(iteration, 20)}`);
    const problem = snapshotProblem(v.snapshot);
    if (problem) return refuse(`not a stage snapshot (${problem})`);
    this.taken++;
    this.bytes += data.byteLength;
    this.keep(iteration as number, stage, v.snapshot as StageSnapshot);
  }

  /** The snapshots a record's reports carry (a checkpoint iteration's, the last one's). */
  fromRecord(rec: IterationRecord): void {
    rec.reports.forEach((r, s) => {
      if (r.snapshot !== undefined) this.keep(rec.iteration, s, r.snapshot as StageSnapshot);
    });
  }

  private keep(iteration: number, stage: number, snap: StageSnapshot): void {
    let row = this.byIteration.get(iteration);
    if (!row)
      this.byIteration.set(iteration, (row = new Array<StageSnapshot | undefined>(this.stages).fill(undefined)));
    row[stage] = snap;
    const older = [...this.byIteration.keys()].sort((a, b) => b - a).slice(KEPT_FLUSHES);
    for (const it of older) this.byIteration.delete(it);
  }

  /** The newest flush before `before` whose state every stage sent, or null. */
  resumePoint(before: number): ResumePoint | null {
    const its = [...this.byIteration.keys()].filter((it) => it < before).sort((a, b) => b - a);
    for (const it of its) {
      const row = this.byIteration.get(it)!;
      if (row.every((x) => x !== undefined)) return { next: it + 1, states: row as StageSnapshot[] };
    }
    return null;
  }

  /** Forget the flushes from `next` on: a replay makes them again. */
  dropFrom(next: number): void {
    for (const it of [...this.byIteration.keys()]) if (it >= next) this.byIteration.delete(it);
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
