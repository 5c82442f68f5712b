// Simulated annealing over stage orders for the offline reference (checks/offline-reference.ts,
// step 8): the same space as the tabu search (checks/offline-tabu.ts), the order of tasks at
// each stage with every task as early as its inputs and the task before it allow, searched
// with larger moves and with worse orders accepted at a falling temperature.
//
// A move is one of three, each kept when the makespan does not grow by more than
// -temperature * ln(u) for a uniform u (Metropolis):
// * insertion (70%): a task, four times in five one on a longest path, moves to another
//   place at most `window` places away in its stage's order;
// * exchange (15%): two tasks of the same kind at most `window` places apart at one stage
//   trade places;
// * microbatch exchange (15%): a microbatch on a longest path and another trade places in
//   the orders of a random range of stages (all of them three times in ten).
// The temperature falls geometrically from T0 to T1, fractions of the starting makespan.
// The in-flight limit is a property of the order (as in the tabu search): an insertion is
// made only when every forward at the stage still starts with fewer than the limit in
// flight; the exchanges keep the kinds at every place, so they keep the count.
// Each changed order is timed in part (checks/offline-order-timing.ts): only the tasks that
// can move, and only until one must end after the acceptance threshold. The best order seen
// is the result, never worse than the one it started from. Interleaved stages (V > 1) are left as
// they are, as in the tabu search.

import { TaskGraph, taskId } from './offline-schedule';
import { keepLimits, stageOrdersOf } from './offline-tabu';
import { OrderTiming } from './offline-order-timing';

export interface AnnealOptions {
  /** Moves tried in all (default 1,000,000; the reference passes its own). */
  readonly steps?: number;
  /** How far in its stage's order a task may move (default 10 places). */
  readonly window?: number;
  /** Starting and final temperature as fractions of the starting makespan (defaults 6e-4 and 3e-5). */
  readonly t0?: number;
  readonly t1?: number;
  /** Told at each tenth of the moves: how many are done, of how many, and the best makespan so far. */
  readonly onProgress?: AnnealProgress;
}

export type AnnealProgress = (done: number, of: number, best: number) => void;

export interface AnnealResult {
  readonly makespan: number;
  readonly start: Float64Array;
  /** Orders timed (some only in part, when rejected early). */
  readonly evaluations: number;
}

/** `start`'s schedule improved by annealing its stage orders, or as given. */
export function anneal(
  g: TaskGraph,
  start: Float64Array,
  makespan: number,
  random: () => number,
  opts: AnnealOptions = {},
): AnnealResult {
  const unchanged = { makespan, start, evaluations: 0 };
  if (g.shape.chunks > 1) return unchanged;
  const orders = stageOrdersOf(g, start);
  if (!keepLimits(g, orders)) return unchanged;
  const timing = new OrderTiming(g, orders);
  if (!(timing.timeAll() <= makespan)) return unchanged;
  const moves = new Moves(g, timing, opts.window ?? 10);
  const best = { makespan: timing.makespan, order: timing.order.slice() };
  const steps = opts.steps ?? 1_000_000;
  const T0 = (opts.t0 ?? 6e-4) * best.makespan,
    T1 = (opts.t1 ?? 3e-5) * best.makespan;
  let evaluations = 1;
  const tenth = Math.ceil(steps / 10);
  for (let step = 0; step < steps; step++) {
    if (step > 0 && step % tenth === 0) opts.onProgress?.(step, steps, best.makespan);
    const threshold = timing.makespan - T0 * Math.pow(T1 / T0, step / steps) * Math.log(1 - random());
    const r = random();
    const from =
      r < 0.7 ? moves.insert(random) : r < 0.85 ? moves.exchange(random) : moves.exchangeMicrobatches(random);
    if (from === undefined) continue;
    evaluations++;
    if (timing.retime(from, threshold) <= threshold) {
      timing.accept();
      moves.accepted();
      if (timing.makespan < best.makespan) {
        best.makespan = timing.makespan;
        best.order.set(timing.order);
      }
    } else {
      timing.reject();
      moves.undo();
    }
  }
  opts.onProgress?.(steps, steps, best.makespan);
  timing.order.set(best.order);
  timing.reindex();
  timing.timeAll();
  return { makespan: timing.makespan, start: timing.start.slice(), evaluations };
}

/**
 * The three moves on the timing's orders. Each makes its change and returns the earliest
 * accepted start among the tasks whose place changed (what OrderTiming.retime needs), or
 * undefined when it changed nothing.
 */
class Moves {
  private readonly critical: Int32Array;
  private criticalCount = 0;
  private readonly swaps: number[] = [];
  private shifted: [number, number] | undefined;

  constructor(
    private readonly g: TaskGraph,
    private readonly timing: OrderTiming,
    private readonly W: number,
  ) {
    this.critical = new Int32Array(g.size);
    this.accepted();
  }

  /** The timing accepted the last change: its longest path is the one to draw from. */
  accepted(): void {
    this.criticalCount = this.timing.criticalPath(this.critical);
  }

  undo(): void {
    if (this.shifted) this.shift(this.shifted[1], this.shifted[0]);
    for (let i = this.swaps.length - 2; i >= 0; i -= 2) this.swapPlaces(this.swaps[i], this.swaps[i + 1]);
  }

  private pickTask(random: () => number): number {
    return random() < 0.8 && this.criticalCount > 0
      ? this.critical[Math.floor(random() * this.criticalCount)]
      : Math.floor(random() * this.g.size);
  }

  /** A task's place and another at most W away in its stage's order, or undefined. */
  private pickPlaces(random: () => number): [number, number] | undefined {
    const { place, offset } = this.timing;
    const v = this.pickTask(random),
      s = this.g.stageOf[v],
      a = place[v];
    const b = a + Math.floor(random() * (2 * this.W + 1)) - this.W;
    return b === a || b < offset[s] || b >= offset[s + 1] ? undefined : [a, b];
  }

  /** Insertion: a task moves to another place in its stage's order, where that keeps the limit. */
  insert(random: () => number): number | undefined {
    this.forget();
    const places = this.pickPlaces(random);
    if (!places) return undefined;
    const [a, b] = places;
    const { order, start } = this.timing;
    const from = start[order[Math.min(a, b)]];
    this.shift(a, b);
    if (!this.timing.stageKeepsLimit(this.g.stageOf[order[b]])) {
      this.shift(b, a);
      return undefined;
    }
    this.shifted = [a, b];
    return from;
  }

  /** Exchange: two tasks of one kind at one stage trade places. */
  exchange(random: () => number): number | undefined {
    this.forget();
    const places = this.pickPlaces(random);
    if (!places) return undefined;
    const { order, start } = this.timing;
    const [v, w] = [order[places[0]], order[places[1]]];
    if (v % this.g.K !== w % this.g.K) return undefined;
    this.swapPlaces(v, w);
    this.swaps.push(v, w);
    return Math.min(start[v], start[w]);
  }

  /** Microbatch exchange: a microbatch on a longest path and another trade places over a range of stages. */
  exchangeMicrobatches(random: () => number): number | undefined {
    this.forget();
    const { g } = this;
    const { start } = this.timing;
    const M = g.shape.microbatches,
      P = g.shape.stages;
    const j = Math.floor(this.pickTask(random) / g.K) % M,
      k = Math.floor(random() * M);
    if (k === j) return undefined;
    let s0 = Math.floor(random() * P),
      s1 = Math.floor(random() * P);
    if (s0 > s1) [s0, s1] = [s1, s0];
    if (random() < 0.3) [s0, s1] = [0, P - 1];
    let from = Infinity;
    for (let s = s0; s <= s1; s++)
      for (let kind = 0; kind < g.K; kind++) {
        const x = taskId(g, s, j, kind),
          y = taskId(g, s, k, kind);
        from = Math.min(from, start[x], start[y]);
        this.swapPlaces(x, y);
        this.swaps.push(x, y);
      }
    return from;
  }

  private forget(): void {
    this.shifted = undefined;
    this.swaps.length = 0;
  }

  /** Move the task at place a to place b, the ones between moving one place over. */
  private shift(a: number, b: number): void {
    const { order, place } = this.timing;
    const v = order[a];
    if (b < a) for (let i = a; i > b; i--) place[(order[i] = order[i - 1])] = i;
    else for (let i = a; i < b; i++) place[(order[i] = order[i + 1])] = i;
    order[b] = v;
    place[v] = b;
  }

  private swapPlaces(v: number, w: number): void {
    const { order, place } = this.timing;
    const a = place[v],
      b = place[w];
    order[a] = w;
    order[b] = v;
    place[w] = a;
    place[v] = b;
  }
}
