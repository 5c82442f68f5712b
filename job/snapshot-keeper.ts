// The launcher's copy of each asynchronous stage's newest snapshot (job/async-recovery.ts),
// sent by its parameter store every --snapshot-every updates on baton.<job>.state.<stage>
// (job/snapshot-send.ts). A recovery restores every stage from the newest one it keeps. A
// state message that is not one of the current launch's, not from the stage its subject
// names, or not an asynchronous snapshot is refused and counted; one older than the kept
// one is dropped.

import { AsyncSnapshot, SnapshotCounts, asyncSnapshotProblem } from '../actors/param-store-snapshot';
import { Bus, Subscription } from '../transport/bus';
import { subject } from '../transport/subjects';
import { quoteValue } from '../base/quote';
import { RejectTally, tallyReject } from '../base/reject-tally';
import { stateMessageHead } from './state-message';

export class SnapshotKeeper {
  /** The newest snapshot of each stage, to restore from. */
  private readonly snaps: (AsyncSnapshot | undefined)[];
  /** The counts of the state each stage would resume from: its newest snapshot's, or those it resumed with since. */
  private readonly counts: SnapshotCounts[];
  private launch: string | undefined;
  /** The updates each stage's state had when the current attempt began. */
  private start: number[];
  /** Per stage, the microbatches the current attempt feeds it below its floor (backwards without an update). */
  private below: number[];
  private readonly sub: Subscription;
  /** Snapshots taken, their bytes on the wire, and the stages' time copying each (ms). */
  taken = 0;
  bytes = 0;
  readonly copyMs: number[] = [];
  /** Stages whose last snapshot (sent as their job was dropped) came in the launch followed. */
  private readonly last = new Set<number>();
  /** lastOf's waiters, told when a last snapshot comes. */
  private readonly waiters = new Set<() => void>();

  constructor(
    bus: Bus,
    private readonly job: string,
    private readonly stages: number,
    private readonly rejects: RejectTally,
  ) {
    this.snaps = new Array<AsyncSnapshot | undefined>(stages).fill(undefined);
    this.counts = Array.from({ length: stages }, () => ({ updates: 0, next: 0, skipped: 0 }));
    this.start = new Array<number>(stages).fill(0);
    this.below = new Array<number>(stages).fill(0);
    this.sub = bus.subscribe(subject(job, 'state', '*'), (subj, data) => this.onState(subj, data));
  }

  /** From now on, snapshots of this launch are taken, and only those (none: undefined). */
  follow(launch: string | undefined): void {
    this.launch = launch;
    this.last.clear();
  }

  /** Resolves once each of `stages` has sent its last snapshot of the launch followed, or after `ms`. */
  async lastOf(stages: readonly number[], ms: number): Promise<void> {
    const done = () => stages.every((s) => this.last.has(s));
    if (done()) return;
    let finish = () => {};
    const waiter = () => void (done() && finish());
    this.waiters.add(waiter);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      finish = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.waiters.delete(waiter);
  }

  private onState(subj: string, data: Uint8Array): void {
    const refuse = (why: string) => tallyReject(this.rejects, `${quoteValue(subj, 200)}: snapshot refused: ${why}`);
    const head = stateMessageHead(subj, data, {
      job: this.job,
      launch: this.launch,
      stages: this.stages,
      noLaunch: 'one taking snapshots',
    });
    if (typeof head === 'string') return refuse(head);
    const { v, stage } = head;
    const problem = asyncSnapshotProblem(v.snapshot);
    if (problem) return refuse(`not an asynchronous snapshot (${problem})`);
    const snap = v.snapshot as AsyncSnapshot;
    if (v.updates !== snap.updates)
      return refuse(`it says ${quoteValue(v.updates, 20)} updates, its snapshot ${snap.updates}`);
    const copyMs = v.copyMs;
    if (typeof copyMs !== 'number' || !(copyMs >= 0) || !Number.isFinite(copyMs))
      return refuse(`copyMs ${quoteValue(copyMs, 20)}`);
    if (v.last !== undefined && typeof v.last !== 'boolean') return refuse(`last ${quoteValue(v.last, 20)}`);
    if (v.last === true) {
      this.last.add(stage);
      for (const w of this.waiters) w();
    }
    this.taken++;
    this.bytes += data.byteLength;
    this.copyMs.push(copyMs);
    if (snap.updates <= this.counts[stage].updates) return;
    this.snaps[stage] = snap;
    this.counts[stage] = { updates: snap.updates, next: snap.next, skipped: snap.skipped };
  }

  /** The counts each stage would resume from now. */
  resumeCounts(): SnapshotCounts[] {
    return this.counts.map((c) => ({ ...c }));
  }

  /** The snapshot each stage resumes from (undefined: the seed's parameters). */
  snapshots(): (AsyncSnapshot | undefined)[] {
    return [...this.snaps];
  }

  /** The stages resume with these counts (a recovery's plan; `below`: its belowFloor): they hold until a newer snapshot comes. */
  resumed(counts: readonly SnapshotCounts[], below: readonly number[]): void {
    counts.forEach((c, s) => (this.counts[s] = { ...c }));
    this.start = counts.map((c) => c.updates);
    this.below = [...below];
  }

  /** The updates each stage's state had when the current attempt began. */
  startUpdates(): number[] {
    return [...this.start];
  }

  /** Per stage, the current attempt's microbatches below the stage's floor (job/async-resume.ts's belowFloor). */
  belowFloorAtStart(): number[] {
    return [...this.below];
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
