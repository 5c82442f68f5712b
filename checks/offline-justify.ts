// Forward-backward improvement ("justification") of an offline schedule
// (checks/offline-reference.ts): schedule every task as late as it can go, in the order of
// the schedule's end times, then as early as it can go, in the order of those start times,
// and again while the makespan falls. Each pass is serial: tasks are placed one at a time at
// the earliest time their inputs, their stage (any idle gap long enough) and the in-flight
// limit allow, which may leave a stage idle on purpose; the list scheduler never does.
//
// Why a pass never makes the schedule longer: the tasks are placed in the order of their
// times in the schedule the pass starts from, so by induction each one's inputs, and every
// task placed before it at its stage, are done no later than in that schedule, and its old
// interval is still free. The in-flight limit is kept by holding a slot open from a
// forward's start until its releasing task (its B, or W with split) is placed: a forward
// goes at t only when fewer than the limit are held at every time from t on. The slots held
// at the forward's old start in the old schedule are at most the limit less one, and every
// slot now held at or after that time was held then (its forward came earlier in the order,
// and its release is later, or not placed yet), so the old start qualifies.
// Time reversed, the same problem appears with every edge turned round: a release task opens
// its slot (in reverse time) and the forward closes it, so one placement routine does both.
// Interleaved stages (V > 1) are left as they are: their focused-microbatch exception to the
// limit is a rule of the list scheduler, not an interval constraint.

import { TaskGraph } from './offline-schedule';

export interface Direction {
  /** Per task, up to two tasks that must end first in this direction (-1: none) and each edge's delay. */
  readonly before: Int32Array;
  readonly delay: Float64Array;
  /** The role of the task that takes a slot (1 = forward, 2 = release). */
  readonly opens: number;
}

export interface Justified {
  readonly makespan: number;
  readonly start: Float64Array;
  /** Forward-backward passes that shortened the schedule. */
  readonly passes: number;
}

/** `start` and `makespan` improved by forward-backward passes (at most `maxPasses`), or as given. */
export function justify(g: TaskGraph, start: Float64Array, makespan: number, maxPasses = 8): Justified {
  if (g.shape.chunks > 1) return { makespan, start, passes: 0 };
  const { size, dur } = g;
  const fwd = forwardDirection(g),
    rev = reverseDirection(g);
  const topo = topologicalRank(g);
  let best = { makespan, start, passes: 0 };
  for (let pass = 0; pass < maxPasses; pass++) {
    const ends = Float64Array.from({ length: size }, (_, id) => best.start[id] + dur[id]);
    const back = place(
      g,
      rev,
      orderBy(size, (id) => -ends[id], topo, -1),
    );
    if (!back) break;
    const rEnd = Float64Array.from({ length: size }, (_, id) => back.start[id] + dur[id]);
    const again = place(
      g,
      fwd,
      orderBy(size, (id) => -rEnd[id], topo, 1),
    );
    if (!again || !(again.makespan < best.makespan)) break;
    best = { makespan: again.makespan, start: again.start, passes: pass + 1 };
  }
  return best;
}

/** The ids sorted by `key` ascending, ties by topological rank times `sign` ascending. */
function orderBy(size: number, key: (id: number) => number, topo: Int32Array, sign: 1 | -1): Int32Array {
  const keys = Float64Array.from({ length: size }, (_, id) => key(id));
  return Int32Array.from({ length: size }, (_, id) => id).sort(
    (a, b) => keys[a] - keys[b] || sign * (topo[a] - topo[b]),
  );
}

/** Each task's predecessors (up to two, -1: none) and their edges' delays: the graph as a forward pass reads it. */
export function forwardDirection(g: TaskGraph): Direction {
  const before = new Int32Array(2 * g.size).fill(-1),
    delay = new Float64Array(2 * g.size);
  const count = new Uint8Array(g.size);
  for (let e = 0; e < 2 * g.size; e++) {
    const x = g.succ[e];
    if (x < 0) continue;
    const k = 2 * x + count[x]++;
    before[k] = e >> 1;
    delay[k] = g.delay[e];
  }
  return { before, delay, opens: 1 };
}

function reverseDirection(g: TaskGraph): Direction {
  return { before: g.succ, delay: g.delay, opens: 2 };
}

/** A rank per task consistent with every edge (Kahn's order over succ). */
function topologicalRank(g: TaskGraph): Int32Array {
  const rank = new Int32Array(g.size);
  const left = g.preds.slice();
  const queue: number[] = [];
  for (let id = 0; id < g.size; id++) if (left[id] === 0) queue.push(id);
  for (let n = 0; n < queue.length; n++) {
    const id = queue[n];
    rank[id] = n;
    for (let e = 2 * id; e < 2 * id + 2; e++) {
      const x = g.succ[e];
      if (x >= 0 && --left[x] === 0) queue.push(x);
    }
  }
  return rank;
}

/** The task that shares `id`'s slot: a forward's release task, or a release task's forward. */
function partnerOf(g: TaskGraph, id: number): number {
  return g.role[id] === 1 ? id + g.K - 1 : id - (g.K - 1);
}

/** Serial placement of every task in `order` in direction `dir`; null when the order cannot keep the limit. */
function place(g: TaskGraph, dir: Direction, order: Int32Array): { makespan: number; start: Float64Array } | null {
  const { size, dur, stageOf, role } = g;
  const P = g.shape.stages;
  const start = new Float64Array(size).fill(NaN);
  const busy = Array.from({ length: P }, () => new StageTimeline());
  const slots = Array.from({ length: P }, () => new SlotIntervals());
  let makespan = 0;
  for (const id of order) {
    let t = 0;
    for (let k = 2 * id; k < 2 * id + 2; k++) {
      const p = dir.before[k];
      if (p < 0) continue;
      if (Number.isNaN(start[p])) return null;
      t = Math.max(t, start[p] + dur[p] + dir.delay[k]);
    }
    const s = stageOf[id];
    if (role[id] === dir.opens) t = Math.max(t, slots[s].freeFrom(g.limits[s]));
    if (t === Infinity) return null;
    t = busy[s].insert(t, dur[id]);
    start[id] = t;
    makespan = Math.max(makespan, t + dur[id]);
    if (role[id] === dir.opens) slots[s].open(id, t);
    else if (role[id] !== 0) slots[s].close(partnerOf(g, id), t + dur[id]);
  }
  return { makespan, start };
}

/** A stage's placed tasks, sorted by start, never overlapping. */
class StageTimeline {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];

  /** Place a task of length `d` at the earliest idle gap at or after `t`; its start. */
  insert(t: number, d: number): number {
    let i = 0;
    while (i < this.starts.length && this.starts[i] < t) {
      if (this.ends[i] > t) t = this.ends[i];
      i++;
    }
    while (i < this.starts.length && t + d > this.starts[i]) {
      t = Math.max(t, this.ends[i]);
      i++;
    }
    this.starts.splice(i, 0, t);
    this.ends.splice(i, 0, t + d);
    return t;
  }
}

/** A stage's slots: one interval per forward in flight, open (end Infinity) until its release is placed. */
class SlotIntervals {
  private readonly from = new Map<number, number>();
  private readonly until = new Map<number, number>();

  open(key: number, t: number): void {
    this.from.set(key, t);
    this.until.set(key, Infinity);
  }

  close(key: number, t: number): void {
    if (this.from.has(key)) this.until.set(key, t);
  }

  /** The earliest t such that fewer than `limit` slots are held at every time from t on. */
  freeFrom(limit: number): number {
    const events: [number, number][] = [];
    for (const [k, a] of this.from) {
      events.push([a, 1]);
      const b = this.until.get(k)!;
      if (b !== Infinity) events.push([b, -1]);
    }
    // A slot freed at t can be taken at t: releases first at equal times.
    events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let held = 0,
      free = 0,
      high = false;
    for (let i = 0; i < events.length; i++) {
      held += events[i][1];
      if (i + 1 < events.length && events[i + 1][0] === events[i][0]) continue;
      if (held >= limit) high = true;
      else if (high) {
        free = events[i][0];
        high = false;
      }
    }
    return high ? Infinity : free;
  }
}
