import { strict as assert } from 'assert';
import { lowerBound } from '../checks/lower-bound';
import { listSchedule } from '../checks/offline-schedule';
import { justify } from '../checks/offline-justify';
import { tabuSearch } from '../checks/offline-tabu';
import { inflightCaps } from '../checks/slot-bound';
import { bf } from '../policies/hints';
import {
  assertLeavesUnsearchableAlone,
  assertRunsOnlyAboveGap,
  paperInstances,
  scheduleOf,
  scheduleProblems,
  stream,
} from './helpers-offline';

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
    assertLeavesUnsearchableAlone((g, start, makespan) => tabuSearch(g, start, makespan, stream()));
  });

  it('runs in the offline reference only above ROUND_GAP times the bound, and never makes it worse', function () {
    this.timeout(60000);
    assertRunsOnlyAboveGap('tabu search', (on) => ({ tabuSteps: on ? 300 : 0, annealSteps: 0 }));
  });
});
