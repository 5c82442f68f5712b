// An asynchronous stage's state as its parameter store (param-store.ts) snapshots it every
// N updates, for a replacement to start from when the stage's process is lost
// (job/async-recovery.ts): the parameters, the NAdamW moments and step, the update count,
// the stream bookkeeping that decides which updates a recovery loses, the staleness of
// each update so far, and the consistency policy's running state (SpecTrain's and LWP's
// steps, PipeMare's update average: policies/consistency/running-state.ts). Nothing of the
// policy's per-microbatch state (stash's copies, FRESCO's bases) is kept: a recovery drops
// every microbatch in flight, so nothing would read it.

import type { OptimizerState } from '../policies/optim/optimizer';
import { snapshotProblem } from '../checks/report-body';
import { quoteValue } from '../base/quote';
import { RunningState, runningStateProblem } from '../policies/consistency/running-state';
import { NAdamW } from '../policies/optim/nadamw';
import { ParamStoreError } from './param-store-policy';
import { StoreState } from './param-store-state';

/** What an asynchronous stage restarts from: a stage snapshot (compute/chunk-optimizer.ts's shape) plus the store's counts. */
export interface AsyncSnapshot {
  readonly params: Record<string, Float32Array>;
  readonly optimizer: OptimizerState[];
  /** Updates made (the store's step), the parameters and moments being those after them. */
  readonly updates: number;
  /** One past the highest microbatch of the stream (job-wide numbering) an update has used,
   * or the stream position the stage last resumed at: every microbatch before it is applied or skipped. */
  readonly next: number;
  /** Microbatches before `next` that recoveries made this stage skip (lost updates so far). */
  readonly skipped: number;
  /** The staleness of each update, in order (what the report's statistics are over). */
  readonly staleness: number[];
  /** The consistency policy's running state, when it has one. */
  readonly policy?: RunningState;
}

/** The stream bookkeeping a recovery reads of a snapshot (job/async-resume.ts). */
export type SnapshotCounts = Pick<AsyncSnapshot, 'updates' | 'next' | 'skipped'>;

/** A copy of the store's state as an AsyncSnapshot (the caller publishes it; the store goes on). */
export function takeSnapshot(st: StoreState): AsyncSnapshot {
  const params: Record<string, Float32Array> = {};
  for (const [n, p] of st.params ?? new Map<string, Float32Array>()) params[n] = Float32Array.from(p);
  return {
    params,
    optimizer: st.optimizer ? [st.optimizer.state()] : [],
    updates: st.step,
    next: st.high,
    skipped: st.skipped,
    staleness: [...st.staleness],
    ...(st.policy?.runningState ? { policy: st.policy.runningState() } : {}),
  };
}

const count = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/** What is wrong with `v` as an asynchronous snapshot, or null. */
export function asyncSnapshotProblem(v: unknown): string | null {
  const base = snapshotProblem(v);
  if (base) return base;
  const s = v as Record<string, unknown>;
  for (const k of ['updates', 'next', 'skipped'] as const)
    if (!count(s[k])) return `its ${k} is ${quoteValue(s[k], 40)}, not a count`;
  if ((s.updates as number) + (s.skipped as number) > (s.next as number))
    return `its ${s.updates as number} updates and ${s.skipped as number} skipped exceed its next microbatch ${s.next as number}`;
  if (!Array.isArray(s.staleness) || s.staleness.length !== s.updates || !s.staleness.every(count))
    return 'its staleness is not one count per update';
  if ((s.optimizer as unknown[]).length !== 1) return 'it has not exactly one optimizer state';
  const policy = s.policy === undefined ? null : runningStateProblem(s.policy);
  if (policy) return `its policy state is ${policy}`;
  return null;
}

/**
 * Puts `snap` into a fresh store's state, the stream resuming at microbatch `resumeAt`:
 * the stage applies the microbatches from max(resumeAt, snap.next) on (its floor) and
 * skips those before it that it has not applied. A snapshot of other parameters (names,
 * sizes) is refused.
 */
export function restoreStore(stage: number, st: StoreState, snap: AsyncSnapshot, resumeAt: number): void {
  const problem = asyncSnapshotProblem(snap);
  if (problem) throw new ParamStoreError(`stage ${stage}: cannot resume from the snapshot: ${problem}`);
  if (!st.params || !st.optimizer)
    throw new ParamStoreError(`stage ${stage}: an emulated stage has no state to resume`);
  for (const [n, p] of st.params) {
    const q = snap.params[n];
    if (!q || q.length !== p.length)
      throw new ParamStoreError(
        `stage ${stage}: the snapshot's parameter ${n} has ${q ? q.length : 'no'} values, the stage ${p.length}`,
      );
  }
  if (Object.keys(snap.params).length !== st.params.size)
    throw new ParamStoreError(`stage ${stage}: the snapshot has parameters this stage does not`);
  (st.optimizer as NAdamW).load(snap.optimizer[0]);
  restorePolicy(stage, st, snap.policy);
  for (const [n, p] of st.params) p.set(snap.params[n]);
  st.step = snap.updates;
  // The configured policy is in force from the next update on (a swap before the snapshot is not carried over).
  st.eras = [{ policy: st.eras[0].policy, fromUpdate: snap.updates + 1, swap: null }];
  st.staleness = [...snap.staleness];
  st.high = Math.max(resumeAt, snap.next);
  st.floor = st.high;
  st.skipped = st.high - snap.updates;
}

/** The policy's running state, into the same policy (one swapped in since starts afresh); arrays only of the stage's parameters, of their sizes. */
function restorePolicy(stage: number, st: StoreState, r: RunningState | undefined): void {
  if (!r || !st.policy?.loadRunningState || st.policy.name !== r.policy) return;
  for (const [what, group] of Object.entries(r.arrays))
    for (const [n, a] of Object.entries(group))
      if (a.length !== st.params?.get(n)?.length)
        throw new ParamStoreError(
          `stage ${stage}: the snapshot's ${r.policy} ${what} of ${n} fits no parameter of the stage`,
        );
  st.policy.loadRunningState(r);
}
