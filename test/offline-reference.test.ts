import { strict as assert } from 'assert';
import { resolveConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { runReference } from '../job/run-reference';
import { simCommand } from '../cli/sim';
import { makeDurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { ROUND_GAP, offlineReference } from '../checks/offline-reference';
import { buildTaskGraph, listSchedule, taskOf } from '../checks/offline-schedule';
import { inflightCaps } from '../checks/slot-bound';
import { justify } from '../checks/offline-justify';
import { BufferLimit } from '../policies/backpressure';
import { loadProfile } from '../models/profile';
import { bf } from '../policies/hints';
import { PipelineShape } from '../policies/task';
import { paperInstances, scheduleOf, scheduleProblems as problems } from './helpers-offline';

const llm = loadProfile('llm');
const multimodal = loadProfile('multimodal');

describe('offline reference', () => {
  it('is a valid schedule under the caps and never below the lower bound, over shapes and limits', function () {
    this.timeout(60000);
    const shapes: PipelineShape[] = [
      { stages: 4, chunks: 1, microbatches: 8, splitBackward: false },
      { stages: 3, chunks: 1, microbatches: 7, splitBackward: true },
      { stages: 2, chunks: 2, microbatches: 6, splitBackward: false },
      { stages: 3, chunks: 2, microbatches: 5, splitBackward: true },
    ];
    const limits: BufferLimit[] = [1, 2, 4, 'depth'];
    let checked = 0;
    for (const shape of shapes)
      for (const limit of limits)
        for (const [profile, seed] of [
          [llm, 1],
          [multimodal, 4],
        ] as const) {
          const d = makeDurationModel({ profile, shape, jitter: 'paper', seed });
          const o = offlineReference(shape, 0, d, limit, { steps: 60, restarts: 2, annealSteps: 20000 });
          const caps = inflightCaps(bf, shape, limit);
          assert.deepEqual(o.caps, caps);
          const what = `${JSON.stringify(shape)} limit ${limit} seed ${seed}`;
          assert.deepEqual(problems(shape, d, caps, o.schedule), [], what);
          assert.equal(o.makespan, Math.max(...o.schedule.map((x) => x.end)), what);
          const lb = lowerBound(shape, 0, d, caps);
          assert.ok(
            o.makespan >= lb.bound * (1 - 1e-12),
            `${what}: offline ${o.makespan} < bound ${lb.bound} (${lb.term})`,
          );
          checked++;
        }
    assert.equal(checked, 32);
  });

  it('the checker above finds a broken schedule: a task moved early, a cap exceeded', () => {
    const shape: PipelineShape = { stages: 3, chunks: 1, microbatches: 4, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 2 });
    const o = offlineReference(shape, 0, d, 2, { steps: 10, restarts: 1, annealSteps: 2000 });
    const early = o.schedule.map((x) =>
      x.stage === 1 && x.task.kind === 'B' && x.task.mb === 0 ? { ...x, start: 0, end: x.end - x.start } : x,
    );
    assert.ok(
      problems(shape, d, [2, 2, 2], early).some((p) =>
        /stage 1, B0: starts at .* before its gradient from B0 at stage 2/.test(p),
      ),
    );
    assert.ok(problems(shape, d, [1, 1, 1], o.schedule).some((p) => /forwards in flight at .*, cap 1/.test(p)));
  });

  it('meets the bound where it is achievable: (M+P-1)(F+B) on uniform, and M round trips one microbatch at a time at limit 1', () => {
    const uniform = loadProfile('uniform');
    for (const [P, M] of [
      [4, 8],
      [3, 5],
    ]) {
      const shape: PipelineShape = { stages: P, chunks: 1, microbatches: M, splitBackward: false };
      const d = makeDurationModel({ profile: uniform, shape, jitter: 'none', seed: 0 });
      assert.ok(Math.abs(offlineReference(shape, 0, d, M).makespan - (M + P - 1) * 30) < 1e-9, `P=${P} M=${M}`);
      assert.ok(Math.abs(offlineReference(shape, 0, d, 1).makespan - M * P * 30) < 1e-9, `P=${P} M=${M} limit 1`);
    }
  });

  it('runs further rounds only while above ROUND_GAP times the bound and gaining, and they never make it worse', () => {
    // Multimodal P=4, limit 2: seeds 1 and 3 end a first round more than 5% above the bound, seed 2 within it.
    let moreRounds = 0,
      stoppedEarly = 0;
    for (const seed of [1, 2, 3]) {
      const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
      const d = makeDurationModel({ profile: multimodal, shape, jitter: 'paper', seed });
      const opts = { steps: 40, reorders: 200, restarts: 2, annealSteps: 0 };
      const once = offlineReference(shape, 0, d, 2, { ...opts, rounds: 0 });
      const more = offlineReference(shape, 0, d, 2, { ...opts, rounds: 3 });
      const bound = lowerBound(shape, 0, d, inflightCaps(bf, shape, 2)).bound;
      assert.ok(more.makespan <= once.makespan, `seed ${seed}: ${more.makespan} > ${once.makespan}`);
      assert.deepEqual(problems(shape, d, more.caps, more.schedule), [], `seed ${seed}`);
      if (once.makespan <= bound * ROUND_GAP) assert.equal(more.evaluations, once.evaluations, `seed ${seed}`);
      else {
        // A round is at most steps + reorders + 1 evaluations.
        assert.ok(more.evaluations > once.evaluations && more.evaluations <= once.evaluations + 3 * 241);
        moreRounds++;
        // Patience 1 stops at the first round that gains nothing: the same random stream, cut short.
        const impatient = offlineReference(shape, 0, d, 2, { ...opts, rounds: 3, patience: 1 });
        assert.ok(impatient.evaluations <= more.evaluations && impatient.makespan >= more.makespan, `seed ${seed}`);
        if (impatient.evaluations < more.evaluations) stoppedEarly++;
      }
    }
    assert.ok(moreRounds > 0, 'no instance was far enough from its bound to run another round');
    assert.ok(stoppedEarly > 0, 'patience 1 never cut the rounds short');
  });

  it('forward-backward passes keep a list schedule valid, never make it longer, and shorten some', () => {
    let shorter = 0,
      checked = 0;
    for (const { shape, limit, d, g, what } of paperInstances([
      [{ stages: 4, chunks: 1, microbatches: 12, splitBackward: false }, [2, 3, 'depth']],
      [{ stages: 3, chunks: 1, microbatches: 8, splitBackward: true }, [1, 2, 'depth']],
    ])) {
      const r = listSchedule(g, g.rest);
      const j = justify(g, r.start, r.makespan);
      const sched = scheduleOf(g, j.start);
      assert.deepEqual(problems(shape, d, inflightCaps(bf, shape, limit), sched), [], what);
      assert.equal(j.makespan, Math.max(...sched.map((x) => x.end)), what);
      assert.ok(j.makespan <= r.makespan, `${what}: ${j.makespan} > ${r.makespan}`);
      if (j.makespan < r.makespan) shorter++;
      checked++;
    }
    assert.equal(checked, 18);
    assert.ok(shorter > 0, 'no list schedule was shortened');
    console.log(`      (${shorter} of ${checked} list schedules shortened)`);
  });

  it('is deterministic for a seed', () => {
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 5 });
    const a = offlineReference(shape, 0, d, 3, { seed: 7, steps: 50, annealSteps: 20000 });
    assert.deepEqual(offlineReference(shape, 0, d, 3, { seed: 7, steps: 50, annealSteps: 20000 }), a);
    assert.notDeepEqual(
      offlineReference(shape, 0, d, 3, { seed: 8, steps: 50, annealSteps: 20000 }).schedule,
      a.schedule,
    );
  });

  it("never deadlocks interleaved: at the limit only the focused microbatch's forward starts, so forwards-first priorities finish too", () => {
    // P=2, V=2, limit 1: with a plain cap of 3, stage 0 could start F0, F1, F2 of chunk 0 and
    // F0@1 would wait for a slot that only B0@0, after F0@1, frees.
    const shape: PipelineShape = { stages: 2, chunks: 2, microbatches: 4, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 3 });
    const g = buildTaskGraph(shape, 0, d, [1, 1]);
    const forwardsFirst = Float64Array.from({ length: g.size }, (_, id) => (id % g.K === 0 ? 2 : 1));
    const r = listSchedule(g, forwardsFirst);
    const sched = Array.from({ length: g.size }, (_, id) => ({
      ...taskOf(g, id),
      start: r.start[id],
      end: r.start[id] + g.dur[id],
    }));
    assert.deepEqual(problems(shape, d, [3, 3], sched), []);
    assert.equal(r.makespan, Math.max(...sched.map((x) => x.end)));
  });

  it('is never above what bf achieved by much, and a run reports it beside its efficiency', async () => {
    const r = await runJob(
      resolveConfig({
        stages: 4,
        microbatches: 16,
        policy: 'bf',
        profile: 'llm',
        jitter: 'paper',
        seed: 3,
        bufferLimit: 3,
        iterations: 2,
      }),
      { clock: 'virtual' },
    );
    const ref = runReference(r, true, { steps: 100, annealSteps: 20000 });
    const s = summarize(r);
    assert.equal(ref.offline_iterations.length, 2);
    assert.ok(ref.offline_ms >= s.lower_bound_ms - 1e-6, `offline ${ref.offline_ms} < bound ${s.lower_bound_ms}`);
    assert.ok(ref.offline_ms <= s.makespan_ms * 1.02, `offline ${ref.offline_ms} vs bf ${s.makespan_ms}`);
    assert.ok(Math.abs(ref.efficiency_vs_offline - ref.offline_ms / s.makespan_ms) < 1e-12);
    assert.deepEqual(ref.offline_caps, [3, 3, 3, 3]);
  });

  it('sim --reference offline puts offline_ms and efficiency_vs_offline in the JSON and both ratios in the table', async () => {
    const flags = [
      '--stages',
      '3',
      '--microbatches',
      '6',
      '--profile',
      'llm',
      '--jitter',
      'paper',
      '--buffer-limit',
      '2',
    ];
    let text = '';
    await simCommand([...flags, '--reference', 'offline', '--json'], (x) => (text = x));
    const j = JSON.parse(text);
    assert.ok(j.offline_ms >= j.lower_bound_ms - 1e-6 && j.offline_ms <= j.makespan_ms * 1.02, text);
    assert.ok(Math.abs(j.efficiency_vs_offline - j.offline_ms / j.makespan_ms) < 1e-12);
    assert.deepEqual(j.offline_caps, [2, 2, 2]);
    await simCommand([...flags, '--compare', 'bf,1f1b', '--reference', 'offline'], (x) => (text = x));
    assert.match(text, /efficiency\s+offline ms\s+vs offline/);
    assert.match(text, /vs offline = offline reference \/ makespan/);
    await simCommand([...flags, '--compare', 'bf,1f1b'], (x) => (text = x));
    assert.doesNotMatch(text, /offline/);
    await simCommand([...flags, '--json'], (x) => (text = x));
    assert.equal(JSON.parse(text).offline_ms, undefined);
  });
});
