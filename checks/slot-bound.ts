// The slot bound: a lower bound on the makespan of one iteration that knows the in-flight
// limit, for the term `lowerBound` (checks/lower-bound.ts) adds to its other two.
//
// Baton counts a forward as in flight at its stage from the start of F(j,c) until the end
// of B(j,c), or of W(j,c) when the backward is split (stage/stage-logic.ts), and every
// policy keeps that count at or below a cap per stage: a non-binding policy its stage's
// buffer limit (limit + V interleaved, as the focused drain allows), a binding schedule
// the peak its own order reaches (policies/backpressure.ts inflightBound). So each
// (j,c) at stage s holds one of at most L_s slots for an interval [F start, release end).
//
// The argument, per physical stage s with cap L = L_s, items i = (j,c) at v = c*P + s:
// * len_i: the interval lasts at least the longest dependency path from the start of
//   F(j,v) to the end of its release task: F(j,v) and every later virtual stage's forward
//   with their messages, the loss stage's backward, every backward back down to v with
//   their messages, then B(j,v) (and W(j,v) with split), as realized. Other stages' queues
//   only lengthen it.
// * The number of open slots never exceeds L, so for any set S of items the total of their
//   interval lengths is at most L times the span those intervals cover.
// * head_i = the earliest F(j,v) can start (its forward chain from 0); tail_i = what must
//   still happen after the slot ends: the gradient's path down to virtual stage 0 after
//   B(j,v) (non-split); 0 with split, since W(j,v) may end after everything else.
// So for every S: makespan >= min_S head + (sum_S len) / L + min_S tail. The bound takes S
// = the items with head >= a for every a, and the items with tail >= b for every b.
// * Ramps (the slots cannot all be open at the ends): with a = min_S head, b = min_S tail,
//   T the makespan, every slot of S lies in [a, T - b], and n_S(t) <= min(L, started_S(t),
//   notEnded_S(t)). The stage runs one task at a time, so the k-th forward of S to start
//   (S_k) does so after the k-1 before it ended: S_k - a >= f_{k-1}, the sum of the k-1
//   shortest forwards at the stage, and S_k >= the k-th smallest head of S. Likewise the
//   k-th latest release end E'_k is followed by the k-1 later release tasks (the stage was
//   free at E'_k): T - b - E'_k >= r_{k-1}, the sum of the k-1 shortest release tasks.
//   Integrating L - n_S over [a, T - b] gives at least D_up = sum_{k<=L} (S_k - a) and
//   D_down = sum_{k<=L} (T - b - E'_k); both at once when |S| >= 2L (then started_S(t) +
//   notEnded_S(t) >= |S| puts one of them at L at every t), else the larger. So
//   T >= a + b + (sum_S len + D) / L.
// It is valid for any schedule that keeps the cap, whatever its order: binding schedules
// with their own caps, the 'depth' limit (cap P - s), async mode (one stream, same count)
// and the real clock (measured durations, message times 0 across clocks: still a path).
// Not captured: queues at the other stages inside a round trip (the slots are timed as if
// the rest of the pipeline were idle), so with a heavy stage downstream it is loose: at P = 8,
// limit 8 the offline search lands within 1.8% of it with stages 1..7 made free and up to 6%
// above it with only stages 1..6 free (bench/README.md, `bench -- reference --relax`).

import { HintPolicy } from '../policies/hint';
import { BufferLimit, inflightBound, stageBufferLimit } from '../policies/backpressure';
import { PipelineShape, fromVirtual, task, validateShape } from '../policies/task';
import { DurationModel } from '../models/durations';

export class SlotBoundError extends Error {
  override name = 'SlotBoundError';
}

export interface SlotBound {
  /** The bound of each physical stage (0 where the stage has no items). */
  readonly perStage: number[];
  /** The largest of perStage. */
  readonly bound: number;
  /** The stage whose bound is the largest (the first such). */
  readonly stage: number;
}

/** The in-flight cap of every stage for `policy` under `limit` (what backpressure guarantees). */
export function inflightCaps(policy: HintPolicy<any>, shape: PipelineShape, limit: BufferLimit): number[] {
  return Array.from({ length: shape.stages }, (_, s) =>
    inflightBound(policy, shape, s, stageBufferLimit(limit, s, shape.stages)),
  );
}

export function slotBound(
  shape: PipelineShape,
  iteration: number,
  d: DurationModel,
  caps: readonly number[],
): SlotBound {
  validateShape(shape);
  const { stages: P, chunks: V, microbatches: M, splitBackward: split } = shape;
  if (caps.length !== P) throw new SlotBoundError(`slot bound: ${caps.length} in-flight caps for ${P} stages`);
  caps.forEach((c, s) => {
    if (!Number.isInteger(c) || c < 1)
      throw new SlotBoundError(
        `slot bound: stage ${s}'s in-flight cap must be a positive integer, got ${JSON.stringify(c)}`,
      );
  });
  const n = P * V;
  const last = n - 1;
  const head = new Float64Array(n * M),
    len = new Float64Array(n * M),
    tail = new Float64Array(n * M),
    fwd = new Float64Array(n * M),
    release = new Float64Array(n * M);
  for (let j = 0; j < M; j++) {
    const pF = new Float64Array(n),
      pB = new Float64Array(n),
      pW = new Float64Array(n),
      cF = new Float64Array(n),
      cB = new Float64Array(n);
    for (let v = 0; v < n; v++) {
      const { stage, chunk } = fromVirtual(v, shape);
      pF[v] = d.compute(iteration, stage, task('F', j, chunk));
      pB[v] = d.compute(iteration, stage, task('B', j, chunk));
      if (split) pW[v] = d.compute(iteration, stage, task('W', j, chunk));
      if (v < last) cF[v] = d.comm(iteration, stage, task('F', j, chunk));
      if (v > 0) cB[v] = d.comm(iteration, stage, task('B', j, chunk));
    }
    // trip[v]: from the start of F(j,v) to the end of B(j,v) with nothing in between queued.
    const trip = new Float64Array(n);
    trip[last] = pF[last] + pB[last];
    for (let v = last - 1; v >= 0; v--) trip[v] = pF[v] + cF[v] + trip[v + 1] + cB[v + 1] + pB[v];
    let h = 0,
      t = 0;
    for (let v = 0; v < n; v++) {
      const i = v * M + j;
      head[i] = h;
      len[i] = trip[v] + pW[v];
      fwd[i] = pF[v];
      release[i] = split ? pW[v] : pB[v];
      h += pF[v] + cF[v];
    }
    for (let v = 0; v < n; v++) {
      tail[v * M + j] = split ? 0 : t;
      t += pB[v] + (v < last ? cB[v + 1] : 0);
    }
  }
  const perStage: number[] = [];
  for (let s = 0; s < P; s++) {
    const items: number[] = [];
    for (let c = 0; c < V; c++) for (let j = 0; j < M; j++) items.push((c * P + s) * M + j);
    const L = caps[s];
    const up = rampSums(items, fwd, L),
      down = rampSums(items, release, L);
    perStage.push(
      Math.max(
        thresholdBound(items, { key: head, ramp: up }, { key: tail, ramp: down }, len, L),
        thresholdBound(items, { key: tail, ramp: down }, { key: head, ramp: up }, len, L),
      ),
    );
  }
  const bound = Math.max(0, ...perStage);
  return { perStage, bound, stage: perStage.indexOf(bound) };
}

/** ramp[k] = the sum of the k shortest durations over `items`, for k < cap. */
function rampSums(items: readonly number[], dur: Float64Array, cap: number): Float64Array {
  const sorted = items.map((i) => dur[i]).sort((a, b) => a - b);
  const ramp = new Float64Array(Math.min(cap, items.length));
  for (let k = 1; k < ramp.length; k++) ramp[k] = ramp[k - 1] + sorted[k - 1];
  return ramp;
}

/** One end of the slots: each item's earliest distance from it (head or tail) and that end's ramp. */
interface SlotEnd {
  readonly key: Float64Array;
  readonly ramp: Float64Array;
}

/**
 * max over a of: a + (sum of len over the items S with key >= a + the ramps' deficit) / cap + (min of
 * other over S): the ramp at the key's end also uses the sorted keys, the other end its durations only.
 */
function thresholdBound(items: readonly number[], near: SlotEnd, far: SlotEnd, len: Float64Array, cap: number): number {
  const key = near.key;
  const byKey = [...items].sort((a, b) => key[a] - key[b]);
  let sum = 0,
    minOther = Infinity,
    best = 0;
  for (let k = byKey.length - 1; k >= 0; k--) {
    const i = byKey[k];
    sum += len[i];
    minOther = Math.min(minOther, far.key[i]);
    // Items with equal keys enter together: only the first of a run is a threshold.
    if (k > 0 && key[byKey[k - 1]] === key[i]) continue;
    const size = byKey.length - k,
      r = Math.min(cap, size);
    let dNear = 0,
      dFar = 0;
    for (let x = 0; x < r && x < near.ramp.length; x++) {
      dNear += Math.max(key[byKey[k + x]] - key[i], near.ramp[x]);
      dFar += far.ramp[x];
    }
    const deficit = size >= 2 * cap ? dNear + dFar : Math.max(dNear, dFar);
    best = Math.max(best, key[i] + (sum + deficit) / cap + minOther);
  }
  return best;
}
