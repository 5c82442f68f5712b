// The stage orders of a schedule and their earliest timing, re-timed in part after a change
// (for the annealing of checks/offline-anneal.ts, which times millions of orders).
//
// Every task starts as early as its inputs (dependency edges with their message times) and
// the task before it at its stage allow. A change of the orders touches a few places; the
// accepted timing keeps each stage's tasks in order of their starts, so every task whose
// start can change starts, in the accepted timing, no earlier than the earliest accepted
// start `from` among the tasks whose place changed: a path from a moved task follows
// unchanged edges, along which accepted starts do not fall, or lands on a place at or
// after the first changed one. So a trial re-times only the tasks whose accepted start is
// at least `from`, in a topological order of the changed graph (Kahn's), and takes the
// latest end of the others from a prefix maximum. It stops once a task must end the
// iteration after the caller's threshold: its start plus its longest path to the end in
// the dependency graph (which the stage edges only lengthen) passes it.

import { TaskGraph } from './offline-schedule';
import { forwardDirection } from './offline-justify';
import { keepsLimit } from './offline-tabu';

export class OrderTiming {
  /** The orders of all stages, stage s at places offset[s] .. offset[s + 1] - 1. */
  readonly order: Int32Array;
  readonly offset: Int32Array;
  readonly place: Int32Array;
  /** The accepted timing. */
  readonly start: Float64Array;
  makespan = Infinity;
  private readonly via: Int32Array;
  private endTask = -1;
  private readonly trial: Float64Array;
  private readonly trialVia: Int32Array;
  private trialMakespan = Infinity;
  private trialEnd = -1;
  /** How many tasks the last trial timed: the first of queue. */
  private timed = 0;
  /** Whether a task's indegree is this trial's (seen[x] === stamp). */
  private stamp = 0;
  private readonly seen: Int32Array;
  private readonly byStart: Int32Array;
  private readonly prefixEnd: Float64Array;
  private readonly prefixTask: Int32Array;
  private readonly jobPred: Int32Array;
  private readonly jobDelay: Float64Array;
  private readonly indeg: Int32Array;
  private readonly queue: Int32Array;

  constructor(
    private readonly g: TaskGraph,
    orders: Int32Array[],
  ) {
    const { size, shape } = g;
    this.offset = new Int32Array(shape.stages + 1);
    orders.forEach((o, s) => (this.offset[s + 1] = this.offset[s] + o.length));
    this.order = new Int32Array(size);
    orders.forEach((o, s) => this.order.set(o, this.offset[s]));
    this.place = new Int32Array(size);
    this.reindex();
    this.start = new Float64Array(size);
    this.trial = new Float64Array(size);
    this.via = new Int32Array(size).fill(-1);
    this.trialVia = new Int32Array(size).fill(-1);
    this.byStart = Int32Array.from({ length: size }, (_, i) => i);
    this.prefixEnd = new Float64Array(size + 1);
    this.prefixTask = new Int32Array(size + 1).fill(-1);
    ({ before: this.jobPred, delay: this.jobDelay } = forwardDirection(g));
    this.indeg = new Int32Array(size);
    this.queue = new Int32Array(size);
    this.seen = new Int32Array(size);
  }

  /** Recompute every task's place from `order` (after setting it wholesale). */
  reindex(): void {
    for (let i = 0; i < this.order.length; i++) this.place[this.order[i]] = i;
  }

  /** Time every task from scratch and accept it; the makespan (Infinity on a cycle). */
  timeAll(): number {
    this.trial.set(this.start);
    if (this.retime(-Infinity, Infinity) < Infinity) this.accept();
    else {
      this.reject();
      this.makespan = Infinity;
    }
    return this.makespan;
  }

  /**
   * Time the changed orders, where no task with an accepted start before `changedFrom` has
   * changed its place: the makespan, or Infinity when it exceeds `threshold` or the orders
   * have a cycle. Follow with accept() or reject().
   */
  retime(changedFrom: number, threshold: number): number {
    const { g, start, trial, trialVia, indeg, queue, order, place, offset, jobPred, jobDelay, byStart } = this;
    const { size, dur, succ, rest, stageOf } = g;
    let lo = 0,
      hi = size;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (start[byStart[mid]] < changedFrom) lo = mid + 1;
      else hi = mid;
    }
    // Indegrees within the re-timed tasks, counted when a task is first reached: the sources
    // are among the first re-timed task of each stage (every later one follows it there).
    const stamp = ++this.stamp,
      seen = this.seen;
    const reach = (x: number) => {
      seen[x] = stamp;
      let k = 0;
      const a = jobPred[2 * x],
        b = jobPred[2 * x + 1],
        at = place[x];
      if (a >= 0 && start[a] >= changedFrom) k++;
      if (b >= 0 && start[b] >= changedFrom) k++;
      if (at > offset[stageOf[x]] && start[order[at - 1]] >= changedFrom) k++;
      indeg[x] = k;
    };
    let n = 0;
    for (let s = 0; s + 1 < offset.length; s++) {
      const a = this.firstRetimed(s, changedFrom);
      if (a === offset[s + 1]) continue;
      reach(order[a]);
      if (indeg[order[a]] === 0) queue[n++] = order[a];
    }
    let makespan = this.prefixEnd[lo],
      endTask = this.prefixTask[lo];
    for (let i = 0; i < n; i++) {
      const id = queue[i];
      let t = 0,
        from = -1;
      for (let k = 2 * id; k < 2 * id + 2; k++) {
        const p = jobPred[k];
        if (p < 0) continue;
        const ready = trial[p] + dur[p] + jobDelay[k];
        if (ready > t) {
          t = ready;
          from = p;
        }
      }
      const at = place[id];
      if (at > offset[stageOf[id]]) {
        const q = order[at - 1];
        const free = trial[q] + dur[q];
        if (free >= t) {
          t = free;
          from = q;
        }
      }
      trial[id] = t;
      trialVia[id] = from;
      if (t + rest[id] > threshold) {
        this.timed = i + 1;
        return (this.trialMakespan = Infinity);
      }
      if (t + dur[id] > makespan) {
        makespan = t + dur[id];
        endTask = id;
      }
      for (let e = 2 * id; e < 2 * id + 3; e++) {
        const x = e < 2 * id + 2 ? succ[e] : at + 1 < offset[stageOf[id] + 1] ? order[at + 1] : -1;
        if (x < 0) continue;
        if (seen[x] !== stamp) reach(x);
        if (--indeg[x] === 0) queue[n++] = x;
      }
    }
    this.timed = n;
    this.trialEnd = endTask;
    return (this.trialMakespan = n === size - lo ? makespan : Infinity);
  }

  /** The first place at stage s whose task's accepted start is at least `from` (the end of the stage if none). */
  private firstRetimed(s: number, from: number): number {
    const { start, order } = this;
    let a = this.offset[s],
      b = this.offset[s + 1];
    while (a < b) {
      const mid = (a + b) >> 1;
      if (start[order[mid]] < from) a = mid + 1;
      else b = mid;
    }
    return a;
  }

  /** Keep the last trial's timing. */
  accept(): void {
    const { start, trial, via, trialVia, byStart, prefixEnd, prefixTask, queue } = this;
    const { size, dur } = this.g;
    for (let i = 0; i < this.timed; i++) {
      const x = queue[i];
      start[x] = trial[x];
      via[x] = trialVia[x];
    }
    // Nearly sorted after a local change: insertion sort.
    for (let i = 1; i < size; i++) {
      const x = byStart[i];
      let k = i - 1;
      for (; k >= 0 && start[byStart[k]] > start[x]; k--) byStart[k + 1] = byStart[k];
      byStart[k + 1] = x;
    }
    for (let i = 0; i < size; i++) {
      const x = byStart[i],
        end = start[x] + dur[x];
      [prefixEnd[i + 1], prefixTask[i + 1]] = end > prefixEnd[i] ? [end, x] : [prefixEnd[i], prefixTask[i]];
    }
    this.makespan = this.trialMakespan;
    this.endTask = this.trialEnd;
  }

  /** Drop the last trial (the caller undoes its change of the orders). */
  reject(): void {
    const { start, trial, queue } = this;
    for (let i = 0; i < this.timed; i++) trial[queue[i]] = start[queue[i]];
  }

  /** The tasks on a longest path of the accepted timing, the last first. */
  criticalPath(out: Int32Array): number {
    let c = 0;
    for (let x = this.endTask; x >= 0; x = this.via[x]) out[c++] = x;
    return c;
  }

  /** Whether every forward at stage s starts with fewer than the stage's limit in flight. */
  stageKeepsLimit(s: number): boolean {
    return keepsLimit(this.g, s, this.order, this.offset[s], this.offset[s + 1]);
  }
}
