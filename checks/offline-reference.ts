// The offline reference: a clairvoyant schedule of one iteration on its realized durations
// and message times, under the same rules as the runtime (dependencies, one task at a time
// per stage, the buffer limit as a non-binding policy keeps it), found by search. Its makespan is what a schedule that
// knew everything in advance achieves: an upper bound on the best possible, beside the
// lower bound (checks/lower-bound.ts), which it can never beat.
//
// The heuristic (deterministic for a seed), over non-delay list schedules
// (checks/offline-schedule.ts), each a priority per task:
// 1. seed orders: longest remaining path (the task's time plus the longest path after it),
//    the same leaning to microbatch order, backward-first in microbatch order (bf's rule),
//    the same with the longest round trips first, and forward-first;
// 2. random restarts: each seed order with every priority multiplied by a lognormal
//    factor of a random spread;
// 3. local search from the best: perturb the priorities of a random window of microbatches
//    (all their tasks at one stage or at all stages), keep the change when the makespan is
//    not worse;
// 4. local search over microbatch orders: bf's rule (a backward first, then the microbatch
//    of lowest rank) with the ranks a permutation, starting from the longest round trips
//    first; a step swaps two microbatches or moves one to another rank, kept when the
//    makespan is not worse. Under a binding limit the order in which microbatches take the
//    slots is most of the decision, and these steps move it directly.
// 5. more rounds of 3 and 4 (from the best priorities and the last microbatch order, with
//    the random stream going on) while the best makespan is above ROUND_GAP times the lower
//    bound and one of the last `patience` rounds shortened it, at most `rounds`: the effort
//    goes to the instances where the reference says least and the search is still getting
//    somewhere (on a hard instance it gains a few ms every round or two for twenty rounds),
//    and an instance already near its bound costs what it did before. The cost stays
//    bounded: (rounds + 1) times steps 3 and 4 at most.
// 6. forward-backward passes over the best (checks/offline-justify.ts; not interleaved):
//    every task as late as it can go in the order of its end, then as early as it can go in
//    the order of those starts, while the makespan falls. These may leave a stage idle on
//    purpose, which no list schedule does; a pass never lengthens the schedule.
// 7. while the result is still above ROUND_GAP times the lower bound, tabu search over the
//    order of tasks at each stage (checks/offline-tabu.ts), from the result's orders: swaps
//    of neighbours on a longest path, each order timed as early as it allows. It never
//    lengthens the schedule.
// 8. while still above ROUND_GAP times the bound, simulated annealing over the same stage
//    orders (checks/offline-anneal.ts): insertions of tasks near a longest path, exchanges
//    of tasks and of microbatches' places, worse orders accepted at a falling temperature.
//    It costs most of the search where it runs (20,000 moves per task, at most 20 million:
//    100–180 s for P = 8, M = 64 on this machine) and reaches orders the tabu search's
//    swaps do not.

import { BufferLimit, stageBufferLimit } from '../policies/backpressure';
import { bf } from '../policies/hints';
import { PipelineShape, Task } from '../policies/task';
import { inflightCaps } from './slot-bound';
import { lowerBound } from './lower-bound';
import { DurationModel } from '../models/durations';
import { ListSchedule, TaskGraph, buildTaskGraph, listSchedule, taskOf } from './offline-schedule';
import { justify } from './offline-justify';
import { tabuSearch } from './offline-tabu';
import { AnnealProgress, anneal } from './offline-anneal';

export interface ScheduledTask {
  readonly stage: number;
  readonly task: Task;
  readonly start: number;
  readonly end: number;
}

export interface OfflineOptions {
  /** Seed of the search's random choices (default 0). */
  readonly seed?: number;
  /** Random restarts per seed order (default 8). */
  readonly restarts?: number;
  /** Local-search steps (default 600). */
  readonly steps?: number;
  /** Steps of the search over microbatch orders (default 3000). */
  readonly reorders?: number;
  /** Most further rounds of steps 3 and 4 while the makespan is above ROUND_GAP times the lower bound (default 24). */
  readonly rounds?: number;
  /** Further rounds stop after this many in a row that did not shorten the best schedule (default 4). */
  readonly patience?: number;
  /** Forward-backward passes over the best schedule (step 6; default 8, 0 for none). */
  readonly justifyPasses?: number;
  /** Steps of the tabu search over stage orders (step 7; default 2000, 0 for none). */
  readonly tabuSteps?: number;
  /** Moves of the annealing over stage orders (step 8; default 20,000 per task, at most 20 million; 0 for none). */
  readonly annealSteps?: number;
  /** Told as step 8 goes (at each tenth of its moves), when it runs: it can take minutes. */
  readonly onAnnealProgress?: AnnealProgress;
}

export interface OfflineReference {
  readonly makespan: number;
  /** Every task with its stage, start and end. */
  readonly schedule: ScheduledTask[];
  /** Schedules evaluated: list schedules, and stage orders in step 7. */
  readonly evaluations: number;
  /** The most forwards the rule lets each stage hold in flight (the slot bound's caps). */
  readonly caps: number[];
  readonly method: string;
}

/**
 * Above this ratio to the lower bound, another round of steps 3 and 4 runs (from the best
 * priorities and the last microbatch order): effort goes where the reference says least.
 */
export const ROUND_GAP = 1.05;

/** Step 8's moves by default: this many per task, at most ANNEAL_STEPS_MAX (20 million, 100–180 s at P = 8, M = 64). */
export const ANNEAL_STEPS_PER_TASK = 20_000;
export const ANNEAL_STEPS_MAX = 20_000_000;

export const OFFLINE_METHOD = `non-delay list scheduling: longest-remaining-path and bf/fb seed orders, lognormal random restarts, local search over microbatch windows and over microbatch orders; then forward-backward passes, and tabu search then simulated annealing over stage orders where still above ${ROUND_GAP} times the lower bound`;

/** `limit`: the job's buffer limit, held as the runtime holds a non-binding policy to it. */
export function offlineReference(
  shape: PipelineShape,
  iteration: number,
  d: DurationModel,
  limit: BufferLimit,
  opts: OfflineOptions = {},
): OfflineReference {
  const limits = Array.from({ length: shape.stages }, (_, s) => stageBufferLimit(limit, s, shape.stages));
  const g = buildTaskGraph(shape, iteration, d, limits);
  const random = xorshift32(opts.seed ?? 0);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const seeds = seedOrders(g);
  let evaluations = 1;
  const best: { prio: Float64Array; run: ListSchedule } = { prio: seeds[0], run: listSchedule(g, seeds[0]) };
  // A schedule as good as the best is kept too: the search drifts along plateaus.
  const tryPrio = (prio: Float64Array): number => {
    const run = listSchedule(g, prio);
    evaluations++;
    if (run.makespan <= best.run.makespan) Object.assign(best, { prio, run });
    return run.makespan;
  };
  for (const s of seeds.slice(1)) tryPrio(s);
  for (const s of seeds)
    for (let r = 0; r < (opts.restarts ?? 8); r++) {
      const spread = 0.02 + 0.3 * random();
      tryPrio(s.map((x) => x * Math.exp(spread * gauss())));
    }
  const M = shape.microbatches;
  const byTrip = Array.from({ length: M }, (_, j) => j).sort((a, b) => g.rest[b * g.K] - g.rest[a * g.K] || a - b);
  let rank: Int32Array = new Int32Array(M);
  byTrip.forEach((j, r) => (rank[j] = r));
  const caps = inflightCaps(bf, shape, limit);
  const bound = lowerBound(shape, iteration, d, caps).bound;
  let stale = 0;
  for (let round = 0; round <= (opts.rounds ?? 24); round++) {
    if (round > 0 && (best.run.makespan <= bound * ROUND_GAP || stale >= (opts.patience ?? 4))) break;
    const before = best.run.makespan;
    windowSearch(g, random, gauss, opts.steps ?? 600, () => best.prio, tryPrio);
    rank = reorderSearch(g, random, opts.reorders ?? 3000, rank, tryPrio);
    stale = best.run.makespan < before ? 0 : stale + 1;
  }
  const justified = justify(g, best.run.start, best.run.makespan, opts.justifyPasses ?? 8);
  const polished =
    justified.makespan > bound * ROUND_GAP
      ? tabuSearch(g, justified.start, justified.makespan, random, { steps: opts.tabuSteps })
      : { ...justified, evaluations: 0 };
  const annealSteps = opts.annealSteps ?? Math.min(ANNEAL_STEPS_MAX, ANNEAL_STEPS_PER_TASK * g.size);
  const annealed =
    polished.makespan > bound * ROUND_GAP && annealSteps > 0
      ? anneal(g, polished.start, polished.makespan, random, { steps: annealSteps, onProgress: opts.onAnnealProgress })
      : { ...polished, evaluations: 0 };
  const { start, makespan } = annealed;
  evaluations += polished.evaluations + annealed.evaluations;
  const schedule: ScheduledTask[] = [];
  for (let id = 0; id < g.size; id++) {
    const { stage, task } = taskOf(g, id);
    schedule.push({ stage, task, start: start[id], end: start[id] + g.dur[id] });
  }
  return { makespan, schedule, evaluations, caps, method: OFFLINE_METHOD };
}

/** bf's rule over the microbatches in `rank` order (rank 0 first); priorities positive. */
function rankPriorities(g: TaskGraph, rank: Int32Array): Float64Array {
  const M = g.shape.microbatches;
  return Float64Array.from({ length: g.size }, (_, id) => {
    const kind = id % g.K;
    return (kind === 0 ? 1 : 3) + (M - rank[Math.floor(id / g.K) % M]) / M - (kind === 2 ? 1 : 0);
  });
}

/** Local search over microbatch orders (step 4 above); `evaluate` keeps the best schedule and gives its makespan. */
function reorderSearch(
  g: TaskGraph,
  random: () => number,
  steps: number,
  start: Int32Array,
  evaluate: (p: Float64Array) => number,
): Int32Array {
  if (steps <= 0) return start;
  const M = g.shape.microbatches;
  let rank: Int32Array = start;
  let current = evaluate(rankPriorities(g, rank));
  for (let step = 0; step < steps; step++) {
    const next = rank.slice();
    const a = Math.floor(random() * M),
      b = Math.floor(random() * M);
    if (random() < 0.5) [next[a], next[b]] = [next[b], next[a]];
    else {
      // Move microbatch a to rank b, shifting the ranks in between by one.
      const from = next[a];
      for (let j = 0; j < M; j++)
        if (from < b && next[j] > from && next[j] <= b) next[j]--;
        else if (b < from && next[j] >= b && next[j] < from) next[j]++;
      next[a] = b;
    }
    const m = evaluate(rankPriorities(g, next));
    if (m <= current) {
      current = m;
      rank = next;
    }
  }
  return rank;
}

/** Local search over microbatch windows (step 3 above): `steps` perturbations of the best priorities. */
function windowSearch(
  g: TaskGraph,
  random: () => number,
  gauss: () => number,
  steps: number,
  bestPrio: () => Float64Array,
  evaluate: (p: Float64Array) => number,
): void {
  const { stages: P, microbatches: M } = g.shape;
  const n = P * g.shape.chunks;
  for (let step = 0; step < steps; step++) {
    const prio = bestPrio().slice();
    const width = 1 + Math.floor(random() * Math.min(M, 8));
    const j0 = Math.floor(random() * (M - width + 1));
    const stage = random() < 0.5 ? Math.floor(random() * P) : -1;
    const spread = 0.05 + 0.5 * random();
    for (let v = 0; v < n; v++) {
      if (stage >= 0 && v % P !== stage) continue;
      for (let j = j0; j < j0 + width; j++) {
        const f = (v * M + j) * g.K;
        for (let k = 0; k < g.K; k++) prio[f + k] *= Math.exp(spread * gauss());
      }
    }
    evaluate(prio);
  }
}

/** The seed orders (priorities, higher first), all positive so that scaling keeps their sign. */
function seedOrders(g: TaskGraph): Float64Array[] {
  const { size, rest, K } = g;
  const M = g.shape.microbatches;
  const scale = Math.max(...rest) || 1;
  const mbOf = (id: number) => Math.floor(id / K) % M;
  const kindOf = (id: number) => id % K;
  const lrp = Float64Array.from({ length: size }, (_, id) => rest[id] + scale * 1e-6);
  const lrpFifo = Float64Array.from({ length: size }, (_, id) => rest[id] + scale * (1 + (M - mbOf(id)) / M) * 0.05);
  // bf's rule: a backward (or W) before a forward, lower microbatches first.
  const bfLike = Float64Array.from(
    { length: size },
    (_, id) => (kindOf(id) === 0 ? 1 : 3) + (M - mbOf(id)) / M - (kindOf(id) === 2 ? 1 : 0),
  );
  const fbLike = Float64Array.from({ length: size }, (_, id) => (kindOf(id) === 0 ? 3 : 1) + (M - mbOf(id)) / M);
  // bf's rule with the microbatches of longest round trip (the rest of their first forward, id j*K) first.
  const trip = (id: number) => rest[mbOf(id) * K] / scale;
  const bfLongFirst = Float64Array.from(
    { length: size },
    (_, id) => (kindOf(id) === 0 ? 1 : 3) + trip(id) - (kindOf(id) === 2 ? 1 : 0),
  );
  return [lrp, lrpFifo, bfLike, fbLike, bfLongFirst];
}

/** Marsaglia's xorshift32, seeded through a multiplicative hash (never 0): uniform in [0, 1). */
function xorshift32(seed: number): () => number {
  let x = Math.imul((seed >>> 0) + 1, 0x9e3779b1) >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
}
