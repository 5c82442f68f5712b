import { strict as assert } from 'assert';
import { makeDurationModel } from '../models/durations';
import { lowerBound } from '../checks/lower-bound';
import { ROUND_GAP, offlineReference } from '../checks/offline-reference';
import { listSchedule } from '../checks/offline-schedule';
import { justify } from '../checks/offline-justify';
import { tabuSearch } from '../checks/offline-tabu';
import { inflightCaps } from '../checks/slot-bound';
import { loadProfile } from '../models/profile';
import { bf } from '../policies/hints';
import { PipelineShape } from '../policies/task';
import { graphOf, paperInstances, scheduleOf, scheduleProblems } from './helpers-offline';

const llm = loadProfile('llm');
const multimodal = loadProfile('multimodal');

/** A fixed stream in [0, 1) for the kicks. */
function stream(): () => number {
  let x = 0;
  return () => (x = (x * 9301 + 49297) % 233280) / 233280;
}

describe('offline tabu search over stage orders', () => {
  it('keeps a schedule valid and at or above the bound, never makes it longer, and shortens some that forward-backward passes left', function () {
    this.timeout(60000);
    let shorter = 0,
      checked = 0;
    for (const { shape, limit, d, g, what } of paperInstances([
      [{ stages: 4, chunks: 1, microbatches: 12, splitBackward: false }, [1, 2, 3, 'depth']],
      [{ stages: 3, chunks: 1, microbatches: 8, splitBackward: true }, [1, 2, 'depth']],
    ])) {
      const r = listSchedule(g, g.rest);
      const j = justify(g, r.start, r.makespan);
      const t = tabuSearch(g, j.start, j.makespan, stream(), { steps: 300 });
      const caps = inflightCaps(bf, shape, limit);
      const sched = scheduleOf(g, t.start);
      assert.deepEqual(scheduleProblems(shape, d, caps, sched), [], what);
      assert.equal(t.makespan, Math.max(...sched.map((x) => x.end)), what);
      assert.ok(t.makespan <= j.makespan, `${what}: ${t.makespan} > ${j.makespan}`);
      const bound = lowerBound(shape, 0, d, caps).bound;
      assert.ok(t.makespan >= bound * (1 - 1e-12), `${what}: ${t.makespan} < bound ${bound}`);
      if (t.makespan < j.makespan) shorter++;
      checked++;
    }
    assert.equal(checked, 21);
    assert.ok(shorter > 0, 'no schedule was shortened');
    console.log(`      (${shorter} of ${checked} justified list schedules shortened)`);
  });

  it('leaves a schedule alone when its stage orders break the limit, and interleaved stages alone', () => {
    const shape: PipelineShape = { stages: 3, chunks: 1, microbatches: 6, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 3 });
    // Forwards first under no limit: every stage holds all six; held to a limit of 2, that order breaks it.
    const free = graphOf(shape, 6, d);
    const forwardsFirst = Float64Array.from({ length: free.size }, (_, id) => (id % free.K === 0 ? 2 : 1));
    const r = listSchedule(free, forwardsFirst);
    const tight = graphOf(shape, 2, d);
    const t = tabuSearch(tight, r.start, r.makespan, stream());
    assert.equal(t.evaluations, 0);
    assert.equal(t.start, r.start);
    const v2: PipelineShape = { stages: 2, chunks: 2, microbatches: 4, splitBackward: false };
    const g = graphOf(v2, 2, makeDurationModel({ profile: llm, shape: v2, jitter: 'paper', seed: 3 }));
    const l = listSchedule(g, g.rest);
    assert.equal(tabuSearch(g, l.start, l.makespan, stream()).evaluations, 0);
  });

  it('runs in the offline reference only above ROUND_GAP times the bound, and never makes it worse', function () {
    this.timeout(60000);
    let ran = 0;
    for (const seed of [1, 3]) {
      const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
      const d = makeDurationModel({ profile: multimodal, shape, jitter: 'paper', seed });
      const opts = { steps: 40, reorders: 200, restarts: 2, rounds: 0, annealSteps: 0 };
      const without = offlineReference(shape, 0, d, 2, { ...opts, tabuSteps: 0 });
      const withTabu = offlineReference(shape, 0, d, 2, { ...opts, tabuSteps: 300 });
      const bound = lowerBound(shape, 0, d, inflightCaps(bf, shape, 2)).bound;
      assert.ok(withTabu.makespan <= without.makespan, `seed ${seed}`);
      assert.deepEqual(scheduleProblems(shape, d, withTabu.caps, withTabu.schedule), [], `seed ${seed}`);
      if (without.makespan <= bound * ROUND_GAP) assert.deepEqual(withTabu, without, `seed ${seed}`);
      else {
        assert.ok(withTabu.evaluations > without.evaluations, `seed ${seed}: the tabu search did not run`);
        ran++;
      }
    }
    assert.ok(ran > 0, 'no instance was far enough from its bound for the tabu search');
  });
});
