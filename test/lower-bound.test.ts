import { strict as assert } from 'assert';
import { DurationModel, makeDurationModel } from '../models/durations';
import { jacksonPreemptive, lowerBound } from '../checks/lower-bound';
import { loadProfile } from '../models/profile';
import { PipelineShape, Task, allTasks, formatTask, task } from '../policies/task';

// A tiny list scheduler over plain data, written independently of checks/lower-bound.ts:
// it runs given per-stage orders (or a greedy random choice) with the realized durations
// and returns the makespan of that valid schedule.

type Ends = Map<string, number>;
const keyOf = (v: number, t: Task) => `${v}:${t.kind}${t.mb}`;

function readyAt(
  shape: PipelineShape,
  d: DurationModel,
  it: number,
  ends: Ends,
  stage: number,
  t: Task,
): number | undefined {
  const P = shape.stages,
    last = P * shape.chunks - 1;
  const v = t.chunk * P + stage;
  const from = (u: number, kind: 'F' | 'B', withComm: boolean): number | undefined => {
    const s = u % P,
      c = Math.floor(u / P);
    const end = ends.get(keyOf(u, task(kind, t.mb, c)));
    return end === undefined ? undefined : end + (withComm ? d.comm(it, s, task(kind, t.mb, c)) : 0);
  };
  if (t.kind === 'F') return v === 0 ? 0 : from(v - 1, 'F', true);
  if (t.kind === 'W') return ends.get(keyOf(v, task('B', t.mb, t.chunk)));
  const fwd = from(v, 'F', false);
  if (v === last) return fwd;
  const grad = from(v + 1, 'B', true);
  return fwd === undefined || grad === undefined ? undefined : Math.max(fwd, grad);
}

/** Run each stage's fixed order; throws on deadlock. */
function runOrders(shape: PipelineShape, d: DurationModel, it: number, orders: Task[][]): number {
  const ends: Ends = new Map();
  const free = new Array(shape.stages).fill(0);
  const next = new Array(shape.stages).fill(0);
  let makespan = 0;
  for (let progress = true; progress;) {
    progress = false;
    for (let s = 0; s < shape.stages; s++) {
      const t = orders[s][next[s]];
      if (!t) continue;
      const ready = readyAt(shape, d, it, ends, s, t);
      if (ready === undefined) continue;
      const end = Math.max(free[s], ready) + d.compute(it, s, t);
      ends.set(keyOf(t.chunk * shape.stages + s, t), end);
      free[s] = end;
      makespan = Math.max(makespan, end);
      next[s]++;
      progress = true;
    }
  }
  orders.forEach((o, s) =>
    assert.equal(next[s], o.length, `stage ${s} deadlocked before ${o[next[s]] && formatTask(o[next[s]])}`),
  );
  return makespan;
}

/** Non-delay list scheduling: a free stage starts a ready task chosen by a seeded coin. */
function runGreedyRandom(shape: PipelineShape, d: DurationModel, it: number, seed: number): number {
  let rng = seed >>> 0;
  const random = () => (rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0) / 4294967296;
  const ends: Ends = new Map();
  const free = new Array(shape.stages).fill(0);
  const todo = Array.from({ length: shape.stages }, () => allTasks(shape));
  let makespan = 0;
  while (todo.some((l) => l.length > 0)) {
    let best: { s: number; start: number; cands: { t: Task; r: number }[] } | undefined;
    for (let s = 0; s < shape.stages; s++) {
      const cands = todo[s].flatMap((t) => {
        const r = readyAt(shape, d, it, ends, s, t);
        return r === undefined ? [] : [{ t, r }];
      });
      if (cands.length === 0) continue;
      const start = Math.max(free[s], Math.min(...cands.map((c) => c.r)));
      if (!best || start < best.start) best = { s, start, cands };
    }
    assert.ok(best, 'no stage can start anything');
    const { s, start, cands } = best;
    const startable = cands.filter((c) => c.r <= start);
    const { t } = startable[Math.floor(random() * startable.length)];
    const end = start + d.compute(it, s, t);
    ends.set(keyOf(t.chunk * shape.stages + s, t), end);
    free[s] = end;
    makespan = Math.max(makespan, end);
    todo[s] = todo[s].filter((x) => x !== t);
  }
  return makespan;
}

/** All forwards (chunks ascending), then all backwards (chunks descending), each W right after its B. */
function gpipeOrders(shape: PipelineShape): Task[][] {
  const { stages: P, chunks: V, microbatches: M, splitBackward } = shape;
  return Array.from({ length: P }, () => {
    const o: Task[] = [];
    for (let c = 0; c < V; c++) for (let j = 0; j < M; j++) o.push(task('F', j, c));
    for (let c = V - 1; c >= 0; c--)
      for (let j = 0; j < M; j++) {
        o.push(task('B', j, c));
        if (splitBackward) o.push(task('W', j, c));
      }
    return o;
  });
}

/** 1F1B for V=1: P-s-1 warm-up forwards, then one forward one backward, then the rest. */
function oneFOneBOrders(shape: PipelineShape): Task[][] {
  const { stages: P, microbatches: M, splitBackward } = shape;
  return Array.from({ length: P }, (_, s) => {
    const o: Task[] = [];
    const back = (j: number) => {
      o.push(task('B', j));
      if (splitBackward) o.push(task('W', j));
    };
    const warm = Math.min(P - s - 1, M);
    for (let j = 0; j < warm; j++) o.push(task('F', j));
    for (let j = warm; j < M; j++) {
      o.push(task('F', j));
      back(j - warm);
    }
    for (let j = M - warm; j < M; j++) back(j);
    return o;
  });
}

const stageWork = (shape: PipelineShape, d: DurationModel, it: number, s: number) =>
  allTasks(shape).reduce((sum, t) => sum + d.compute(it, s, t), 0);

const uniform = loadProfile('uniform');
const llm = loadProfile('llm');
const multimodal = loadProfile('multimodal');

describe('makespan lower bound', () => {
  it('equals M(F+B) for a single stage', () => {
    const shape = { stages: 1, chunks: 1, microbatches: 7, splitBackward: false };
    const d = makeDurationModel({ profile: uniform, shape, jitter: 'none', seed: 0 });
    assert.equal(lowerBound(shape, 0, d).bound, 7 * 30);
  });

  it('equals the 1F1B makespan (M+P-1)(F+B) on uniform without jitter, which the simulated 1F1B achieves', () => {
    for (const [P, M] of [
      [2, 4],
      [4, 8],
      [8, 8],
      [8, 3],
    ]) {
      const shape = { stages: P, chunks: 1, microbatches: M, splitBackward: false };
      const d = makeDurationModel({ profile: uniform, shape, jitter: 'none', seed: 0 });
      const lb = lowerBound(shape, 0, d);
      assert.equal(runOrders(shape, d, 0, oneFOneBOrders(shape)), (M + P - 1) * 30);
      assert.ok(Math.abs(lb.bound - (M + P - 1) * 30) < 1e-9, `P=${P} M=${M}: bound ${lb.bound}`);
    }
  });

  it('never exceeds the makespan of GPipe, 1F1B or random greedy schedules, under paper jitter too', () => {
    const cases: [string, PipelineShape][] = [
      ['llm', { stages: 4, chunks: 1, microbatches: 6, splitBackward: false }],
      ['llm', { stages: 3, chunks: 1, microbatches: 5, splitBackward: true }],
      ['multimodal', { stages: 4, chunks: 2, microbatches: 4, splitBackward: false }],
      ['multimodal', { stages: 2, chunks: 3, microbatches: 5, splitBackward: true }],
      ['uniform', { stages: 3, chunks: 2, microbatches: 6, splitBackward: true }],
    ];
    const profiles = { uniform, llm, multimodal } as const;
    let checked = 0;
    for (const [name, shape] of cases)
      for (const jitter of ['none', 'compute', 'paper'] as const)
        for (const seed of [1, 2]) {
          const d = makeDurationModel({ profile: profiles[name as keyof typeof profiles], shape, jitter, seed });
          const { bound } = lowerBound(shape, 3, d);
          const makespans = [runOrders(shape, d, 3, gpipeOrders(shape))];
          if (shape.chunks === 1) makespans.push(runOrders(shape, d, 3, oneFOneBOrders(shape)));
          for (let r = 0; r < 4; r++) makespans.push(runGreedyRandom(shape, d, 3, seed * 100 + r));
          for (const m of makespans) {
            assert.ok(
              bound <= m * (1 + 1e-12),
              `${name} ${JSON.stringify(shape)} ${jitter} seed ${seed}: bound ${bound} > makespan ${m}`,
            );
            checked++;
          }
        }
    assert.ok(checked > 150);
  });

  it("is at least every stage's total work and the critical path", () => {
    const shape = { stages: 6, chunks: 2, microbatches: 9, splitBackward: true };
    for (const profile of [llm, multimodal]) {
      const d = makeDurationModel({ profile, shape, jitter: 'paper', seed: 11 });
      const lb = lowerBound(shape, 0, d);
      assert.equal(lb.perStage.length, 6);
      for (let s = 0; s < 6; s++) assert.ok(lb.perStage[s] >= stageWork(shape, d, 0, s) - 1e-9, `stage ${s}`);
      assert.ok(lb.bound >= lb.criticalPath && lb.bound === Math.max(lb.criticalPath, ...lb.perStage));
      assert.match(lb.method, /Jackson/);
    }
  });

  it('sees the heavy last stage of llm: the bound exceeds the uniform-stage estimate', () => {
    const shape = { stages: 8, chunks: 1, microbatches: 32, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'none', seed: 0 });
    const lb = lowerBound(shape, 0, d);
    const heaviest = lb.perStage.indexOf(Math.max(...lb.perStage));
    assert.equal(heaviest, 7);
    assert.ok(lb.bound >= 32 * 3 * d.base(7, 'F', 0));
  });

  it("solves small one-machine problems exactly with Jackson's preemptive rule", () => {
    const f = (xs: number[]) => Float64Array.from(xs);
    // Task 0 (r=0, p=4, q=0) is preempted at t=1 by task 1 (p=2, q=10): C1=3, C1+q1=13, C0=5.
    assert.equal(jacksonPreemptive(f([0, 1]), f([4, 2]), f([0, 10]), 2), 13);
    // An idle gap until the second release: max(0+2+1, 10+3+0) = 13.
    assert.equal(jacksonPreemptive(f([0, 10]), f([2, 3]), f([1, 0]), 2), 13);
    // Equal releases: largest tail first, ends 2, 4, 7 plus tails 5, 3, 1 -> 8.
    assert.equal(jacksonPreemptive(f([1, 1, 1]), f([1, 2, 3]), f([5, 3, 1]), 3), 8);
  });

  it('takes well under 50 ms for P=32, V=1, M=192 under paper jitter', function () {
    const shape = { stages: 32, chunks: 1, microbatches: 192, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 9 });
    lowerBound(shape, 0, d);
    let best = Infinity;
    for (let i = 1; i <= 5; i++) {
      // CPU time: the machine's other processes do not count against the bound.
      const t0 = process.cpuUsage();
      lowerBound(shape, i, d);
      const used = process.cpuUsage(t0);
      best = Math.min(best, (used.user + used.system) / 1000);
    }
    assert.ok(best < 50, `best of 5: ${best.toFixed(1)} ms of CPU`);
  });
});
