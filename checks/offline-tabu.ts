// Tabu search over stage orders for the offline reference (checks/offline-reference.ts):
// the list scheduler's search decides priorities, and every schedule it sees is non-delay;
// this one decides the order of tasks at each stage directly and times each task as early
// as its inputs and the task before it at its stage allow, so a stage may wait for a task
// that is not ready yet, which no list schedule does.
//
// A schedule is the order of tasks at every stage. Its makespan is the longest path through
// the dependency edges (with message times) and the edges between neighbours at a stage, as
// in the disjunctive graph of a job shop. The in-flight limit is a property of the order
// alone: a stage runs one task at a time, so the forwards in flight when a forward starts
// are the forwards before it at its stage less the release tasks (B, or W with split)
// before it, and that count must be below the stage's limit, as the runtime's rule for a
// non-binding policy (policies/backpressure.ts) has it.
//
// A step (Nowicki and Smutnicki's neighbourhood on a critical path, widened to every
// adjacent pair): find a longest path, cut it into blocks of tasks that run back to back on
// one stage, and try swapping each adjacent pair in a block, where the swap keeps the limit
// and leaves no cycle. Swaps off the critical path cannot shorten it. The best swap is made
// even when it lengthens the schedule, unless it undoes a recent one (tabu for `tenure`
// steps) and does not beat the best so far. After `patience` steps without a new best, the
// search goes back to the best order and makes three random allowed swaps on its longest
// path before going on. The best order found is the result; it is never worse than the
// one it started from. Interleaved stages (V > 1) are left as they are: their
// focused-microbatch exception to the limit is a rule of the list scheduler, not of an order.

import { TaskGraph } from './offline-schedule';
import { forwardDirection } from './offline-justify';

export interface TabuOptions {
  /** Steps in all (default 2000). */
  readonly steps?: number;
  /** Steps a swap stays forbidden to undo (default 15). */
  readonly tenure?: number;
  /** Steps without a new best before going back to it (default 100). */
  readonly patience?: number;
}

export interface TabuResult {
  readonly makespan: number;
  readonly start: Float64Array;
  /** Orders evaluated. */
  readonly evaluations: number;
}

/** `start`'s schedule improved by tabu search over its stage orders, or as given. */
export function tabuSearch(
  g: TaskGraph,
  start: Float64Array,
  makespan: number,
  random: () => number,
  opts: TabuOptions = {},
): TabuResult {
  const unchanged = { makespan, start, evaluations: 0 };
  if (g.shape.chunks > 1) return unchanged;
  const stageOrders = stageOrdersOf(g, start);
  if (!keepLimits(g, stageOrders)) return unchanged;
  const orders = new StageOrders(g, stageOrders);
  if (!(orders.evaluate() <= makespan)) return unchanged;
  let evaluations = 1;
  const best = { makespan: orders.makespan, start: orders.start.slice(), order: orders.snapshot() };
  const tenure = opts.tenure ?? 15,
    patience = opts.patience ?? 100;
  // u * size + v -> the step until which putting u right before v again is forbidden.
  const tabu = new Map<number, number>();
  let stale = 0;
  for (let step = 0; step < (opts.steps ?? 2000); step++) {
    let chosen = -1,
      chosenMs = Infinity;
    for (const u of orders.criticalSwaps()) {
      const v = orders.nextOf(u);
      if (!orders.swap(u)) continue;
      const ms = orders.evaluate();
      evaluations++;
      orders.swap(v);
      const forbidden = (tabu.get(u * g.size + v) ?? -1) > step;
      if ((!forbidden || ms < best.makespan) && ms < chosenMs) [chosen, chosenMs] = [u, ms];
    }
    if (chosen < 0) break;
    const v = orders.nextOf(chosen);
    orders.swap(chosen);
    tabu.set(v * g.size + chosen, step + tenure);
    orders.evaluate();
    if (orders.makespan < best.makespan) {
      Object.assign(best, { makespan: orders.makespan, start: orders.start.slice(), order: orders.snapshot() });
      stale = 0;
    } else if (++stale >= patience) {
      orders.restore(best.order);
      orders.evaluate();
      kick(orders, random);
      stale = 0;
    }
  }
  return { makespan: best.makespan, start: best.start, evaluations };
}

/** The tasks of each stage in the order of their starts in `start`. */
export function stageOrdersOf(g: TaskGraph, start: Float64Array): Int32Array[] {
  // Tasks of length 0 share their start with the next task at their stage: ends break the tie.
  const end = (id: number) => start[id] + g.dur[id];
  const ids = Int32Array.from({ length: g.size }, (_, i) => i).sort(
    (a, b) => start[a] - start[b] || end(a) - end(b) || a - b,
  );
  const orders = Array.from({ length: g.shape.stages }, () => [] as number[]);
  for (const id of ids) orders[g.stageOf[id]].push(id);
  return orders.map((o) => Int32Array.from(o));
}

/** Whether every forward at stage s starts with fewer than the stage's limit in flight, for its order at order[begin..end). */
export function keepsLimit(g: TaskGraph, s: number, order: Int32Array, begin = 0, end = order.length): boolean {
  const { role, limits } = g;
  let open = 0;
  for (let i = begin; i < end; i++) {
    const r = role[order[i]];
    if (r === 1) {
      if (open >= limits[s]) return false;
      open++;
    } else if (r === 2) open--;
  }
  return true;
}

/** Whether every stage's order keeps its limit. */
export function keepLimits(g: TaskGraph, orders: readonly Int32Array[]): boolean {
  return orders.every((order, s) => keepsLimit(g, s, order));
}

/** Three random allowed swaps on the longest path (the order is left evaluated). */
function kick(orders: StageOrders, random: () => number): void {
  for (let k = 0; k < 3; k++) {
    const moves = orders.criticalSwaps();
    if (moves.length === 0) return;
    const u = moves[Math.floor(random() * moves.length)];
    const v = orders.nextOf(u);
    if (!orders.swap(u)) continue;
    // With tasks of length 0 a swap on a longest path can close a cycle: undo it.
    if (orders.evaluate() === Infinity) {
      orders.swap(v);
      orders.evaluate();
    }
  }
}

/** The order of tasks at each stage as a doubly linked list, and its earliest timing. */
class StageOrders {
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly head: Int32Array;
  readonly start: Float64Array;
  makespan = 0;
  /** Per task, the predecessor that sets its start (-1: none), and whether that is its stage neighbour. */
  private readonly via: Int32Array;
  private readonly byStage: Uint8Array;
  private readonly jobPred: Int32Array;
  private readonly jobDelay: Float64Array;
  private readonly indeg: Int32Array;
  private readonly queue: Int32Array;
  private endTask = -1;

  constructor(
    private readonly g: TaskGraph,
    orders: readonly Int32Array[],
  ) {
    const { size } = g;
    this.prev = new Int32Array(size).fill(-1);
    this.next = new Int32Array(size).fill(-1);
    this.head = new Int32Array(g.shape.stages).fill(-1);
    this.start = new Float64Array(size);
    this.via = new Int32Array(size);
    this.byStage = new Uint8Array(size);
    this.indeg = new Int32Array(size);
    this.queue = new Int32Array(size);
    ({ before: this.jobPred, delay: this.jobDelay } = forwardDirection(g));
    orders.forEach((order, s) => {
      if (order.length > 0) this.head[s] = order[0];
      for (let i = 1; i < order.length; i++) this.link(order[i - 1], order[i]);
    });
  }

  nextOf(u: number): number {
    return this.next[u];
  }

  snapshot(): Int32Array {
    const out = new Int32Array(this.next.length + this.head.length);
    out.set(this.next);
    out.set(this.head, this.next.length);
    return out;
  }

  restore(snap: Int32Array): void {
    const n = this.next.length;
    this.next.set(snap.subarray(0, n));
    this.head.set(snap.subarray(n));
    this.prev.fill(-1);
    for (let id = 0; id < n; id++) if (this.next[id] >= 0) this.prev[this.next[id]] = id;
  }

  /** Swap u with the task after it at its stage; false (and no change) when that breaks the limit. */
  swap(u: number): boolean {
    const { role } = this.g;
    const v = this.next[u];
    if (v < 0) return false;
    // v would start before u frees its slot: the forwards in flight before u must leave room.
    if (role[u] === 2 && role[v] === 1 && this.inflightBefore(u) >= this.g.limits[this.g.stageOf[u]]) return false;
    const a = this.prev[u],
      b = this.next[v];
    if (a >= 0) this.link(a, v);
    else {
      this.head[this.g.stageOf[u]] = v;
      this.prev[v] = -1;
    }
    this.link(v, u);
    if (b >= 0) this.link(u, b);
    else this.next[u] = -1;
    return true;
  }

  private link(a: number, b: number): void {
    this.next[a] = b;
    this.prev[b] = a;
  }

  /** Forwards in flight at u's stage when u starts. */
  private inflightBefore(u: number): number {
    const { role } = this.g;
    let open = 0;
    for (let x = this.prev[u]; x >= 0; x = this.prev[x]) open += role[x] === 1 ? 1 : role[x] === 2 ? -1 : 0;
    return open;
  }

  /** Earliest start of every task for the current orders; the makespan, or Infinity on a cycle. */
  evaluate(): number {
    const { g, start, indeg, queue, prev, next, via, byStage, jobPred, jobDelay } = this;
    const { size, dur, succ } = g;
    for (let id = 0; id < size; id++) indeg[id] = g.preds[id] + (prev[id] >= 0 ? 1 : 0);
    let n = 0;
    for (let id = 0; id < size; id++) if (indeg[id] === 0) queue[n++] = id;
    let makespan = -1;
    for (let i = 0; i < n; i++) {
      const id = queue[i];
      let t = 0,
        from = -1,
        stage = 0;
      for (let k = 2 * id; k < 2 * id + 2; k++) {
        const p = jobPred[k];
        if (p >= 0 && start[p] + dur[p] + jobDelay[k] > t) [t, from] = [start[p] + dur[p] + jobDelay[k], p];
      }
      const q = prev[id];
      if (q >= 0 && start[q] + dur[q] >= t) [t, from, stage] = [start[q] + dur[q], q, 1];
      start[id] = t;
      via[id] = from;
      byStage[id] = stage;
      if (t + dur[id] > makespan) [makespan, this.endTask] = [t + dur[id], id];
      for (let e = 2 * id; e < 2 * id + 2; e++) {
        const x = succ[e];
        if (x >= 0 && --indeg[x] === 0) queue[n++] = x;
      }
      const x = next[id];
      if (x >= 0 && --indeg[x] === 0) queue[n++] = x;
    }
    this.makespan = n === size ? makespan : Infinity;
    return this.makespan;
  }

  /** The tasks u on the last evaluation's longest path that the task after u at its stage follows on it. */
  criticalSwaps(): number[] {
    const out: number[] = [];
    for (let x = this.endTask; x >= 0 && this.via[x] >= 0; x = this.via[x]) if (this.byStage[x]) out.push(this.via[x]);
    return out;
  }
}
