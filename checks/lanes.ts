// Checks and statistics of a wide job (T tensor-parallel ranks × D replicas per stage), from
// its event stream (pure). Each lane (rank, replica) is a whole pipeline the plain
// validation checks on its own; on top, RRFP's appendix D.1 invariant: every rank of a
// tensor-parallel group ran the same sequence of collective-relevant tasks (F and B), and a
// violation names the group, the ranks and the first position where they differ. Per rank:
// compute, blocking (idle with work left, no round open), TP peer wait (a round open, a peer
// not yet at it), TP coordination (the rest of an open round: the all-gather's own time) and
// deferrals (rounds without agreement).

import { formatTask, task } from '../policies/task';
import { BatonEvent } from '../stage/events';

export const laneOfEvent = (e: BatonEvent): { rank: number; replica: number } => ({
  rank: e.rank ?? 0,
  replica: e.replica ?? 0,
});

/** The events of each lane, keyed `rank|replica`, in their order. */
export function eventsByLane(events: readonly BatonEvent[]): Map<string, BatonEvent[]> {
  const out = new Map<string, BatonEvent[]>();
  for (const e of events) {
    const k = `${e.rank ?? 0}|${e.replica ?? 0}`;
    const list = out.get(k);
    if (list) list.push(e);
    else out.set(k, [e]);
  }
  return out;
}

/** The first violation of the TP invariant in every group, or none. */
export function tpInvariantProblems(
  events: readonly BatonEvent[],
  shape: { stages: number; ranks: number; replicas: number },
): string[] {
  if (shape.ranks <= 1) return [];
  // [replica][stage][rank] -> the collective-relevant tasks in the order they started.
  const seqs = new Map<string, string[]>();
  for (const e of events) {
    if (e.type !== 'task-start' || e.kind === 'W') continue;
    const k = `${e.replica ?? 0}|${e.stage}|${e.rank ?? 0}`;
    const text = `${formatTask(task(e.kind, e.mb, e.chunk))} (iteration ${e.iteration})`;
    const list = seqs.get(k);
    if (list) list.push(text);
    else seqs.set(k, [text]);
  }
  const problems: string[] = [];
  for (let d = 0; d < shape.replicas; d++)
    for (let s = 0; s < shape.stages; s++) {
      const ref = seqs.get(`${d}|${s}|0`) ?? [];
      for (let r = 1; r < shape.ranks; r++) {
        const other = seqs.get(`${d}|${s}|${r}`) ?? [];
        const n = Math.max(ref.length, other.length);
        for (let i = 0; i < n; i++)
          if (ref[i] !== other[i]) {
            problems.push(
              `TP group of stage ${s}, replica ${d}: ranks 0 and ${r} differ at collective-relevant task ${i}: ${ref[i] ?? '(none)'} vs ${other[i] ?? '(none)'}`,
            );
            break;
          }
      }
    }
  return problems;
}

export interface LaneStageStats {
  stage: number;
  rank: number;
  replica: number;
  compute_ms: number;
  blocking_ms: number;
  /** Open rounds' time after the last peer proposal reached the rank: the all-gather's own (RRFP's TP Coord). */
  tp_coordination_ms: number;
  /** Open rounds' time until the last peer proposal reached the rank: a peer not yet at the round. */
  tp_peer_wait_ms: number;
  deferrals: number;
}

/** Per stage actor, over the iterations `measured` keeps: ms computing, blocked, waiting for a peer's proposal, coordinating, and deferrals. */
export function laneStageStats(
  events: readonly BatonEvent[],
  measured: (iteration: number) => boolean,
): LaneStageStats[] {
  const out = new Map<string, LaneStageStats>();
  const open = new Map<string, number>();
  const of = (e: BatonEvent): LaneStageStats => {
    const k = `${e.replica ?? 0}|${e.stage}|${e.rank ?? 0}`;
    let st = out.get(k);
    if (!st) {
      st = {
        stage: e.stage,
        ...laneOfEvent(e),
        compute_ms: 0,
        blocking_ms: 0,
        tp_coordination_ms: 0,
        tp_peer_wait_ms: 0,
        deferrals: 0,
      };
      out.set(k, st);
    }
    return st;
  };
  for (const e of events) {
    if (!measured(e.iteration)) continue;
    const k = `${e.replica ?? 0}|${e.stage}|${e.rank ?? 0}`;
    if (e.type === 'task-start') open.set(k, e.t);
    else if (e.type === 'task-end') {
      const t0 = open.get(k);
      if (t0 !== undefined) of(e).compute_ms += e.t - t0;
      open.delete(k);
    } else if (e.type === 'wait') {
      const st = of(e);
      if (e.reason === 'tp-coord') st.tp_coordination_ms += e.ms;
      else if (e.reason === 'tp-peer') st.tp_peer_wait_ms += e.ms;
      else st.blocking_ms += e.ms;
      if (e.reason === 'tp-defer') st.deferrals++;
    }
  }
  return [...out.values()].sort((a, b) => a.replica - b.replica || a.stage - b.stage || a.rank - b.rank);
}
