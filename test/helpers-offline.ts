import { strict as assert } from 'assert';
import { DurationModel, makeDurationModel } from '../models/durations';
import { OfflineOptions, ROUND_GAP, ScheduledTask, offlineReference } from '../checks/offline-reference';
import { TaskGraph, buildTaskGraph, listSchedule, taskOf } from '../checks/offline-schedule';
import { lowerBound } from '../checks/lower-bound';
import { inflightCaps } from '../checks/slot-bound';
import { bf } from '../policies/hints';
import { BufferLimit, stageBufferLimit } from '../policies/backpressure';
import { loadProfile } from '../models/profile';
import { PipelineShape, Task, allTasks, formatTask } from '../policies/task';
import { dependenciesOf } from './helpers-task';

/**
 * The problems of an offline schedule, checked here from the task definitions alone
 * (policies/task.ts), not with the graph the reference built: every task once with its
 * duration; F after its predecessor's F plus the message; B after its F and the next
 * virtual stage's B plus the message; W after its B; one task at a time per stage; at most
 * caps[s] forwards in flight (F start to B end, W end with split) at stage s.
 */
export function scheduleProblems(
  shape: PipelineShape,
  d: DurationModel,
  caps: readonly number[],
  sched: readonly ScheduledTask[],
): string[] {
  const out: string[] = [];
  const at = new Map<string, ScheduledTask>();
  const key = (s: number, t: Task) => `${s}:${formatTask(t)}`;
  for (const x of sched) {
    if (at.has(key(x.stage, x.task))) out.push(`stage ${x.stage}: ${formatTask(x.task)} twice`);
    at.set(key(x.stage, x.task), x);
  }
  const eps = 1e-9;
  for (let s = 0; s < shape.stages; s++)
    for (const t of allTasks(shape)) {
      const x = at.get(key(s, t));
      const where = `stage ${s}, ${formatTask(t)}`;
      if (!x) {
        out.push(`${where}: missing`);
        continue;
      }
      if (Math.abs(x.end - x.start - d.compute(0, s, t)) > eps)
        out.push(`${where}: lasts ${x.end - x.start}, not ${d.compute(0, s, t)}`);
      const after = (stage: number, dep: Task, delay: number, what: string) => {
        const y = at.get(key(stage, dep));
        if (y && x.start < y.end + delay - eps)
          out.push(
            `${where}: starts at ${x.start} before ${what} ${formatTask(dep)} at stage ${stage} (${y.end} + ${delay})`,
          );
      };
      const deps = dependenciesOf(s, t, shape);
      for (const dep of deps) after(dep.stage, dep.task, dep.remote ? d.comm(0, dep.stage, dep.task) : 0, dep.what);
      if (deps.length === 0 && x.start < -eps) out.push(`${where}: starts before 0`);
    }
  for (let s = 0; s < shape.stages; s++) {
    const mine = sched.filter((x) => x.stage === s).sort((a, b) => a.start - b.start);
    for (let i = 1; i < mine.length; i++)
      if (mine[i].start < mine[i - 1].end - eps)
        out.push(
          `stage ${s}: ${formatTask(mine[i].task)} at ${mine[i].start} while ${formatTask(mine[i - 1].task)} runs until ${mine[i - 1].end}`,
        );
    // In flight: +1 at each F's start, -1 at each release's end; at equal times the release first.
    const release = shape.splitBackward ? 'W' : 'B';
    const steps = mine
      .flatMap((x) =>
        x.task.kind === 'F' ? [{ t: x.start, d: 1 }] : x.task.kind === release ? [{ t: x.end, d: -1 }] : [],
      )
      .sort((a, b) => a.t - b.t || a.d - b.d);
    let n = 0;
    for (const e of steps)
      if ((n += e.d) > caps[s]) {
        out.push(`stage ${s}: ${n} forwards in flight at ${e.t}, cap ${caps[s]}`);
        break;
      }
  }
  return out;
}

/** One iteration's task graph with each stage's buffer limit under `limit`. */
export function graphOf(shape: PipelineShape, limit: BufferLimit, d: DurationModel): TaskGraph {
  const limits = Array.from({ length: shape.stages }, (_, s) => stageBufferLimit(limit, s, shape.stages));
  return buildTaskGraph(shape, 0, d, limits);
}

/** The tasks of `g` at the times `start`, as the reference reports a schedule. */
export function scheduleOf(g: TaskGraph, start: Float64Array): ScheduledTask[] {
  return Array.from({ length: g.size }, (_, id) => ({
    ...taskOf(g, id),
    start: start[id],
    end: start[id] + g.dur[id],
  }));
}

/** Paper-jitter instances for sweeps over schedules: each shape at each of its limits, with llm seed 1 and multimodal seeds 2 and 4. */
export function* paperInstances(
  sweep: readonly (readonly [PipelineShape, readonly BufferLimit[]])[],
): Generator<{ shape: PipelineShape; limit: BufferLimit; d: DurationModel; g: TaskGraph; what: string }> {
  const llm = loadProfile('llm'),
    multimodal = loadProfile('multimodal');
  for (const [shape, limits] of sweep)
    for (const limit of limits)
      for (const [profile, seed] of [
        [llm, 1],
        [multimodal, 2],
        [multimodal, 4],
      ] as const) {
        const d = makeDurationModel({ profile, shape, jitter: 'paper', seed });
        yield {
          shape,
          limit,
          d,
          g: graphOf(shape, limit, d),
          what: `${JSON.stringify(shape)} limit ${limit} seed ${seed}`,
        };
      }
}

/** A step over stage orders: the search, from a schedule's starts and makespan. */
type OrderSearch = (
  g: TaskGraph,
  start: Float64Array,
  makespan: number,
) => { start: Float64Array; evaluations: number };

/**
 * That `search` leaves alone what it cannot search: a schedule whose stage orders break the
 * limit (forwards first under no limit, held to a limit of 2), and interleaved stages.
 */
export function assertLeavesUnsearchableAlone(search: OrderSearch): void {
  const llm = loadProfile('llm');
  const shape: PipelineShape = { stages: 3, chunks: 1, microbatches: 6, splitBackward: false };
  const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 3 });
  const free = graphOf(shape, 6, d);
  const forwardsFirst = Float64Array.from({ length: free.size }, (_, id) => (id % free.K === 0 ? 2 : 1));
  const r = listSchedule(free, forwardsFirst);
  const t = search(graphOf(shape, 2, d), r.start, r.makespan);
  assert.equal(t.evaluations, 0);
  assert.equal(t.start, r.start);
  const v2: PipelineShape = { stages: 2, chunks: 2, microbatches: 4, splitBackward: false };
  const g = graphOf(v2, 2, makeDurationModel({ profile: llm, shape: v2, jitter: 'paper', seed: 3 }));
  const l = listSchedule(g, g.rest);
  assert.equal(search(g, l.start, l.makespan).evaluations, 0);
}

/**
 * That a step of the offline reference, off and on as `step` sets it, runs only above
 * ROUND_GAP times the bound and never makes the reference worse (multimodal 4 x 12, limit 2,
 * seeds 1 and 3; at least one above the gap).
 */
export function assertRunsOnlyAboveGap(name: string, step: (on: boolean) => OfflineOptions): void {
  const multimodal = loadProfile('multimodal');
  let ran = 0;
  for (const seed of [1, 3]) {
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
    const d = makeDurationModel({ profile: multimodal, shape, jitter: 'paper', seed });
    const opts = { steps: 40, reorders: 200, restarts: 2, rounds: 0 };
    const without = offlineReference(shape, 0, d, 2, { ...opts, ...step(false) });
    const withStep = offlineReference(shape, 0, d, 2, { ...opts, ...step(true) });
    const bound = lowerBound(shape, 0, d, inflightCaps(bf, shape, 2)).bound;
    assert.ok(withStep.makespan <= without.makespan, `seed ${seed}`);
    assert.deepEqual(scheduleProblems(shape, d, withStep.caps, withStep.schedule), [], `seed ${seed}`);
    if (without.makespan <= bound * ROUND_GAP) assert.deepEqual(withStep, without, `seed ${seed}`);
    else {
      assert.ok(withStep.evaluations > without.evaluations, `seed ${seed}: the ${name} did not run`);
      ran++;
    }
  }
  assert.ok(ran > 0, `no instance was far enough from its bound for the ${name}`);
}

/** A fixed stream in [0, 1) for the searches' random choices. */
export function stream(seed = 0): () => number {
  let x = seed;
  return () => (x = (x * 9301 + 49297) % 233280) / 233280;
}
