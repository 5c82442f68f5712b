// One iteration's task graph over realized durations, and the list scheduler the offline
// reference (checks/offline-reference.ts) searches with: plain data, no runtime.
//
// Tasks (id = ((v * M + j) * K + kind), kind 0 = F, 1 = B, 2 = W with split, K = 2 or 3),
// edges with the message time as their delay, exactly the dependencies of the lower bound
// (checks/lower-bound.ts) and the validator: F(j,v) -> F(j,v+1) after comm, F(j,v) ->
// B(j,v), B(j,v+1) -> B(j,v) after comm, B(j,v) -> W(j,v). A physical stage runs one
// task at a time. In flight as Baton counts it (stage/stage-logic.ts): a forward from its
// start until the end of its B (its W with split); a slot freed at t can be taken by a
// forward starting at t. The rule is the runtime's for a non-binding policy
// (policies/backpressure.ts) with stage s's buffer limit L_s: a forward may start while
// fewer than L_s are in flight; interleaved (V > 1), at or above it only a forward of the
// stage's focused microbatch (the lowest with a task left there) may, so at most L_s + V
// are ever in flight and the lowest unfinished microbatch can always go on: no deadlock.
// (The runtime's drain also holds back other backwards; nothing here needs that.)
//
// The scheduler is non-delay list scheduling: whenever a stage is free and a task is
// ready there (and, for a forward, allowed), it starts the allowed ready task of highest
// priority. A priority vector is the whole decision; every one gives a valid schedule.
// Not modelled: anything the lower bound does not model either (links without contention,
// no memory but the in-flight count).

import { PipelineShape, Task, TaskKind, fromVirtual, validateShape } from '../policies/task';
import { DurationModel } from '../models/durations';
import { Heap } from '../base/binary-heap';

export class OfflineScheduleError extends Error {
  override name = 'OfflineScheduleError';
}

export interface TaskGraph {
  readonly shape: PipelineShape;
  /** Each stage's buffer limit (the in-flight count at which forwards stop, but the focused one's). */
  readonly limits: readonly number[];
  /** Tasks per (virtual stage, microbatch): 2, or 3 with split backward. */
  readonly K: number;
  readonly size: number;
  readonly stageOf: Uint16Array;
  readonly dur: Float64Array;
  /** Up to two successors per task (-1: none) and the delay on each edge. */
  readonly succ: Int32Array;
  readonly delay: Float64Array;
  readonly preds: Uint8Array;
  /** Longest path from a task's start to the end of the iteration (its own time included). */
  readonly rest: Float64Array;
  /** 1 for a forward, 2 for the task that frees its slot, 0 otherwise. */
  readonly role: Uint8Array;
  /** The task kind of each kind index. */
  readonly kinds: readonly TaskKind[];
}

export const taskId = (g: Pick<TaskGraph, 'shape' | 'K'>, v: number, j: number, kind: number) =>
  (v * g.shape.microbatches + j) * g.K + kind;

export function taskOf(g: TaskGraph, id: number): { stage: number; task: Task } {
  const M = g.shape.microbatches;
  const kind = id % g.K,
    vj = (id - kind) / g.K,
    j = vj % M,
    v = (vj - j) / M;
  const { stage, chunk } = fromVirtual(v, g.shape);
  return { stage, task: { kind: g.kinds[kind], mb: j, chunk } };
}

export function buildTaskGraph(
  shape: PipelineShape,
  iteration: number,
  d: DurationModel,
  limits: readonly number[],
): TaskGraph {
  validateShape(shape);
  const { stages: P, chunks: V, microbatches: M, splitBackward: split } = shape;
  const n = P * V,
    last = n - 1,
    K = split ? 3 : 2,
    size = n * M * K;
  const kinds: TaskKind[] = split ? ['F', 'B', 'W'] : ['F', 'B'];
  const stageOf = new Uint16Array(size),
    dur = new Float64Array(size),
    role = new Uint8Array(size),
    preds = new Uint8Array(size);
  const succ = new Int32Array(size * 2).fill(-1),
    delay = new Float64Array(size * 2);
  const g = { shape, K };
  for (let v = 0; v < n; v++) {
    const { stage, chunk } = fromVirtual(v, shape);
    for (let j = 0; j < M; j++) {
      const f = taskId(g, v, j, 0),
        b = taskId(g, v, j, 1);
      for (let k = 0; k < K; k++) {
        stageOf[f + k] = stage;
        dur[f + k] = d.compute(iteration, stage, { kind: kinds[k], mb: j, chunk });
      }
      role[f] = 1;
      role[split ? b + 1 : b] = 2;
      succ[2 * f] = b;
      preds[b]++;
      if (v < last) {
        succ[2 * f + 1] = taskId(g, v + 1, j, 0);
        delay[2 * f + 1] = d.comm(iteration, stage, { kind: 'F', mb: j, chunk });
        preds[taskId(g, v + 1, j, 0)]++;
      }
      if (v > 0) {
        succ[2 * b] = taskId(g, v - 1, j, 1);
        delay[2 * b] = d.comm(iteration, stage, { kind: 'B', mb: j, chunk });
        preds[taskId(g, v - 1, j, 1)]++;
      }
      if (split) {
        succ[2 * b + 1] = b + 1;
        preds[b + 1]++;
      }
    }
  }
  // Longest remaining path: W first, then B from v = 0 up, then F from the loss stage down.
  const rest = new Float64Array(size);
  const tail = (id: number) => {
    let r = 0;
    for (let e = 2 * id; e < 2 * id + 2; e++) if (succ[e] >= 0) r = Math.max(r, delay[e] + rest[succ[e]]);
    rest[id] = dur[id] + r;
  };
  for (let v = 0; v < n; v++)
    for (let j = 0; j < M; j++) {
      if (split) tail(taskId(g, v, j, 2));
      tail(taskId(g, v, j, 1));
    }
  for (let v = last; v >= 0; v--) for (let j = 0; j < M; j++) tail(taskId(g, v, j, 0));
  return { shape, limits, K, size, stageOf, dur, succ, delay, preds, rest, role, kinds };
}

/** Start times of one list schedule. */
export interface ListSchedule {
  readonly makespan: number;
  readonly start: Float64Array;
  /** When each task's inputs were all there. */
  readonly readyAt: Float64Array;
}

/** Non-delay list scheduling of `g` with `prio` (higher runs first). */
export function listSchedule(g: TaskGraph, prio: Float64Array): ListSchedule {
  const { size, succ, delay, dur, stageOf, role, K } = g;
  const { stages: P, chunks: V, microbatches: M } = g.shape;
  // Per (stage, microbatch): tasks not yet started; per stage, the lowest microbatch with one.
  const left = new Int32Array(P * M).fill(V * K),
    focus = new Int32Array(P);
  const started = new Uint8Array(size);
  const mbOf = (id: number) => ((id - (id % K)) / K) % M;
  const remaining = g.preds.slice();
  const readyAt = new Float64Array(size);
  let now = 0;
  /** The focused microbatch's forward ready at stage s now, or -1. */
  const focusForward = (s: number): number => {
    if (focus[s] >= M) return -1;
    for (let c = 0; c < V; c++) {
      const id = ((c * P + s) * M + focus[s]) * K;
      if (remaining[id] === 0 && !started[id] && readyAt[id] <= now) return id;
    }
    return -1;
  };
  const start = new Float64Array(size).fill(NaN);
  const end = new Float64Array(size);
  // Events: code 2*id = id ends, 2*id+1 = id becomes ready (all its inputs arrived).
  const evKey = (code: number) => (code & 1 ? readyAt[code >> 1] : end[code >> 1]);
  const events = new Heap((a, b) => evKey(a) < evKey(b));
  const higher = (a: number, b: number) => prio[a] > prio[b] || (prio[a] === prio[b] && a < b);
  // Per stage: the ready forwards and the other ready tasks.
  const fwd = Array.from({ length: P }, () => new Heap(higher));
  const other = Array.from({ length: P }, () => new Heap(higher));
  const busy = new Uint8Array(P),
    inflight = new Int32Array(P);
  for (let id = 0; id < size; id++) if (remaining[id] === 0) events.push(2 * id + 1);
  let done = 0,
    makespan = 0;
  while (events.size > 0) {
    const t = evKey(events.peek());
    now = t;
    while (events.size > 0 && evKey(events.peek()) <= t) {
      const code = events.pop(),
        id = code >> 1,
        s = stageOf[id];
      if (code & 1) {
        (role[id] === 1 ? fwd : other)[s].push(id);
        continue;
      }
      busy[s] = 0;
      done++;
      if (role[id] === 2) inflight[s]--;
      for (let e = 2 * id; e < 2 * id + 2; e++) {
        const x = succ[e];
        if (x < 0) continue;
        readyAt[x] = Math.max(readyAt[x], end[id] + delay[e]);
        if (--remaining[x] === 0) events.push(2 * x + 1);
      }
    }
    for (let s = 0; s < P; s++) {
      if (busy[s]) continue;
      // Started forwards leave the heap lazily (the focused one may start from outside it).
      while (fwd[s].size > 0 && started[fwd[s].peek()]) fwd[s].pop();
      const o = other[s].size > 0 ? other[s].peek() : -1;
      const f = inflight[s] < g.limits[s] ? (fwd[s].size > 0 ? fwd[s].peek() : -1) : V > 1 ? focusForward(s) : -1;
      const id = f >= 0 && (o < 0 || higher(f, o)) ? f : o;
      if (id < 0) continue;
      if (id === o) other[s].pop();
      started[id] = 1;
      const k = s * M + mbOf(id);
      if (--left[k] === 0) while (focus[s] < M && left[s * M + focus[s]] === 0) focus[s]++;
      if (role[id] === 1) inflight[s]++;
      busy[s] = 1;
      start[id] = t;
      end[id] = t + dur[id];
      makespan = Math.max(makespan, end[id]);
      events.push(2 * id);
    }
  }
  checkAllRan(g, done);
  return { makespan, start, readyAt };
}

function checkAllRan(g: TaskGraph, done: number): void {
  if (done !== g.size)
    throw new OfflineScheduleError(
      `offline schedule: ${g.size - done} of ${g.size} tasks never ran (stage limits [${g.limits.join(', ')}]), which the focused drain should make impossible`,
    );
}
