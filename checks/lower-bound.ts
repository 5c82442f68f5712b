// A lower bound on the makespan of one iteration given its realized durations, valid
// for ANY execution order in which each stage runs one task at a time and a message
// takes exactly its comm time. The iteration starts at 0 with every microbatch's data
// at stage 0 and ends when the last task of every stage has ended.
//
// The task DAG (virtual stage v = c*P + s, one chain of tasks per microbatch j):
//   F(j,v)   -> F(j,v+1)  after p(F(j,v)) + comm(F(j,v))
//   F(j,v)   -> B(j,v)    after p(F(j,v))        (the loss stage's B needs only this)
//   B(j,v+1) -> B(j,v)    after p(B(j,v+1)) + comm(B(j,v+1))
//   B(j,v)   -> W(j,v)    after p(B(j,v))        (split backward only)
// Head r = longest path from time 0 to a task's start, tail q = longest path from its
// end to the end of the iteration, both with unlimited stages. In any feasible schedule
// a task starts no earlier than r and the iteration lasts at least its end plus q.
//
// Two bounds, the larger is returned:
// * critical path: max over tasks of r + p + q (the DAG alone);
// * per stage: the stage must process all its tasks one at a time with those release
//   times and tails. Dropping every other constraint and allowing preemption gives the
//   one-machine problem 1|r_j, q_j, pmtn|max(C_j + q_j), which Jackson's preemptive rule
//   (always run the released task with the largest tail) solves exactly. Its optimum
//   is a lower bound for every non-preemptive schedule of the real pipeline, and it is
//   never below the critical path of any task on that stage nor below the stage's work.
// * slot (when the stages' in-flight caps are given): a stage holds at most L_s forwards
//   in flight, each from its F's start to its B's end (W's with split), which lasts at
//   least its round trip through the later stages; see checks/slot-bound.ts.
// The bound is the largest term; `term` says which one set it.
// Not captured: the interplay of several stages' capacity (heads do not see that stage
// 0 must run its forwards one after another), so the bound loosens under imbalance.

import { PipelineShape, fromVirtual, task, validateShape } from '../policies/task';
import { DurationModel } from '../models/durations';
import { SlotBound, slotBound } from './slot-bound';
import { Heap } from '../base/binary-heap';

export interface LowerBound {
  readonly bound: number;
  /** Jackson's preemptive optimum for each physical stage. */
  readonly perStage: number[];
  readonly criticalPath: number;
  /** The slot bound per stage, when in-flight caps were given. */
  readonly slot?: SlotBound;
  /** Which term is the bound: 'critical-path', 'stage <s>' or 'slot <s>'. */
  readonly term: string;
  readonly method: string;
}

export const LOWER_BOUND_METHOD =
  "max(critical path, per-stage preemptive one-machine bound 1|r,q,pmtn|Cmax by Jackson's rule)";

export const SLOT_BOUND_METHOD = `${LOWER_BOUND_METHOD} and the slot bound max_s (sum of minimal slot times)/L_s plus head and tail`;

/** `caps`: each stage's in-flight cap (checks/slot-bound.ts inflightCaps); without them, no slot term. */
export function lowerBound(
  shape: PipelineShape,
  iteration: number,
  d: DurationModel,
  caps?: readonly number[],
): LowerBound {
  validateShape(shape);
  const { stages: P, chunks: V, microbatches: M } = shape;
  const n = P * V;
  const t = realized(shape, iteration, d);
  const { rF, rB, qF, qB } = headsAndTails(shape, t);
  let criticalPath = 0;
  for (let i = 0; i < n * M; i++) criticalPath = Math.max(criticalPath, rF[i] + t.pF[i] + qF[i]);
  const perStage = stageBounds(shape, t, { rF, rB, qF, qB });
  const slot = caps ? slotBound(shape, iteration, d, caps) : undefined;
  const stageMax = Math.max(...perStage);
  const bound = Math.max(criticalPath, stageMax, slot?.bound ?? 0);
  const term =
    slot && slot.bound === bound && slot.bound > stageMax && slot.bound > criticalPath
      ? `slot ${slot.stage}`
      : stageMax === bound && stageMax > criticalPath
        ? `stage ${perStage.indexOf(stageMax)}`
        : 'critical-path';
  return { bound, perStage, criticalPath, slot, term, method: slot ? SLOT_BOUND_METHOD : LOWER_BOUND_METHOD };
}

/** The realized durations of an iteration, indexed [v * M + j] over virtual stages v. */
interface Realized {
  readonly pF: Float64Array;
  readonly pB: Float64Array;
  readonly pW: Float64Array;
  readonly cF: Float64Array;
  readonly cB: Float64Array;
}

function realized(shape: PipelineShape, iteration: number, d: DurationModel): Realized {
  const { stages: P, chunks: V, microbatches: M, splitBackward: split } = shape;
  const n = P * V;
  const last = n - 1;
  const pF = new Float64Array(n * M),
    pB = new Float64Array(n * M),
    pW = new Float64Array(n * M);
  const cF = new Float64Array(n * M),
    cB = new Float64Array(n * M);
  for (let v = 0; v < n; v++) {
    const { stage, chunk } = fromVirtual(v, shape);
    for (let j = 0; j < M; j++) {
      const i = v * M + j;
      const f = task('F', j, chunk),
        b = task('B', j, chunk);
      pF[i] = d.compute(iteration, stage, f);
      pB[i] = d.compute(iteration, stage, b);
      if (split) pW[i] = d.compute(iteration, stage, task('W', j, chunk));
      if (v < last) cF[i] = d.comm(iteration, stage, f);
      if (v > 0) cB[i] = d.comm(iteration, stage, b);
    }
  }

  return { pF, pB, pW, cF, cB };
}

/** Heads (earliest starts, r) and tails (least work after, q) of every F and B. */
function headsAndTails(shape: PipelineShape, t: Realized) {
  const { stages: P, chunks: V, microbatches: M, splitBackward: split } = shape;
  const n = P * V;
  const last = n - 1;
  const { pF, pB, pW, cF, cB } = t;
  const rF = new Float64Array(n * M),
    rB = new Float64Array(n * M);
  for (let j = 0; j < M; j++) {
    for (let v = 1; v < n; v++) {
      const k = (v - 1) * M + j;
      rF[v * M + j] = rF[k] + pF[k] + cF[k];
    }
    const l = last * M + j;
    rB[l] = rF[l] + pF[l];
    for (let v = last - 1; v >= 0; v--) {
      const i = v * M + j,
        k = i + M;
      rB[i] = Math.max(rF[i] + pF[i], rB[k] + pB[k] + cB[k]);
    }
  }

  // Tails; W has tail 0 (nothing depends on it).
  const qF = new Float64Array(n * M),
    qB = new Float64Array(n * M);
  for (let j = 0; j < M; j++) {
    for (let v = 0; v < n; v++) {
      const i = v * M + j,
        k = i - M;
      qB[i] = Math.max(split ? pW[i] : 0, v > 0 ? cB[i] + pB[k] + qB[k] : 0);
    }
    for (let v = last; v >= 0; v--) {
      const i = v * M + j,
        k = i + M;
      qF[i] = Math.max(pB[i] + qB[i], v < last ? cF[i] + pF[k] + qF[k] : 0);
    }
  }

  return { rF, rB, qF, qB };
}

/** Jackson's preemptive one-machine optimum for each physical stage. */
function stageBounds(shape: PipelineShape, t: Realized, h: ReturnType<typeof headsAndTails>): number[] {
  const { stages: P, chunks: V, microbatches: M, splitBackward: split } = shape;
  const { pF, pB, pW } = t;
  const { rF, rB, qF, qB } = h;
  const perTask = split ? 3 : 2;
  const size = V * M * perTask;
  const r = new Float64Array(size),
    p = new Float64Array(size),
    q = new Float64Array(size);
  const perStage: number[] = [];
  for (let s = 0; s < P; s++) {
    let t = 0;
    for (let c = 0; c < V; c++) {
      for (let j = 0; j < M; j++) {
        const i = (c * P + s) * M + j;
        r[t] = rF[i];
        p[t] = pF[i];
        q[t++] = qF[i];
        r[t] = rB[i];
        p[t] = pB[i];
        q[t++] = qB[i];
        if (split) {
          r[t] = rB[i] + pB[i];
          p[t] = pW[i];
          q[t++] = 0;
        }
      }
    }
    perStage.push(jacksonPreemptive(r, p, q, size));
  }
  return perStage;
}

/** Optimal max(C_j + q_j) on one machine with release times and preemption (Jackson's rule). */
export function jacksonPreemptive(r: Float64Array, p: Float64Array, q: Float64Array, size: number): number {
  const order = new Uint32Array(size);
  for (let i = 0; i < size; i++) order[i] = i;
  order.sort((a, b) => r[a] - r[b]);
  const rem = p.slice(0, size);
  const heap = new Heap((a, b) => q[a] > q[b]); // the largest tail first
  let t = 0,
    next = 0,
    best = 0;
  while (next < size || heap.size > 0) {
    if (heap.size === 0) t = Math.max(t, r[order[next]]);
    while (next < size && r[order[next]] <= t) heap.push(order[next++]);
    const top = heap.peek();
    const release = next < size ? r[order[next]] : Infinity;
    if (t + rem[top] <= release) {
      t += rem[top];
      heap.pop();
      best = Math.max(best, t + q[top]);
    } else {
      rem[top] -= release - t;
      t = release;
    }
  }
  return best;
}
