import { strict as assert } from 'assert';
import { makeDurationModel } from '../models/durations';
import { loadProfile } from '../models/profile';
import { lowerBound } from '../checks/lower-bound';
import { RelaxError, freeStages, parseStages } from '../checks/offline-relax';
import { offlineReference } from '../checks/offline-reference';
import { inflightCaps, slotBound } from '../checks/slot-bound';
import { bf } from '../policies/hints';
import { PipelineShape, allTasks } from '../policies/task';

const llm = loadProfile('llm');

describe('offline relaxation', () => {
  it('keeps every dependency path: the critical path and stage 0 slot bound are the same', () => {
    for (const shape of [
      { stages: 4, chunks: 1, microbatches: 8, splitBackward: false },
      { stages: 3, chunks: 2, microbatches: 6, splitBackward: false },
    ] as PipelineShape[]) {
      const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 3 });
      const free = Array.from({ length: shape.stages - 1 }, (_, i) => i + 1);
      const r = freeStages(shape, d, free);
      const caps = new Array(shape.stages).fill(2);
      const [a, b] = [lowerBound(shape, 0, d, caps), lowerBound(shape, 0, r, caps)];
      assert.ok(Math.abs(a.criticalPath - b.criticalPath) < 1e-9, `${a.criticalPath} vs ${b.criticalPath}`);
      const [sa, sb] = [slotBound(shape, 0, d, caps), slotBound(shape, 0, r, caps)];
      assert.ok(Math.abs(sa.perStage[0] - sb.perStage[0]) < 1e-9, `${sa.perStage[0]} vs ${sb.perStage[0]}`);
    }
  });

  it('runs the freed stages in no time and leaves the others as they were', () => {
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 3, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 5 });
    const r = freeStages(shape, d, [2, 3]);
    for (const t of allTasks(shape)) {
      for (const s of [0, 1]) {
        assert.equal(r.compute(0, s, t), d.compute(0, s, t));
        // Stage 0 sends no gradient.
        if (t.kind === 'F' || s > 0) assert.equal(r.comm(0, s, t), d.comm(0, s, t));
      }
      for (const s of [2, 3]) assert.equal(r.compute(0, s, t), 0);
      // Stage 2's F carries its time on the activation; the loss stage's B carries F and B.
      if (t.kind === 'F') assert.equal(r.comm(0, 2, t), d.comm(0, 2, t) + d.compute(0, 2, t));
      else assert.equal(r.comm(0, 3, t), d.comm(0, 3, t) + d.compute(0, 3, t) + d.compute(0, 3, { ...t, kind: 'F' }));
    }
  });

  it('gives an instance the offline search schedules with the freed stages in no time, never below its bound', function () {
    this.timeout(30000);
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 12, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 1 });
    const r = freeStages(shape, d, [1, 2, 3]);
    const caps = inflightCaps(bf, shape, 2);
    const o = offlineReference(shape, 0, r, 2, { steps: 50, restarts: 2, reorders: 200 });
    const lb = lowerBound(shape, 0, r, caps);
    assert.ok(o.makespan >= lb.bound * (1 - 1e-12), `relaxed offline ${o.makespan} < bound ${lb.bound}`);
    for (const x of o.schedule) if (x.stage > 0) assert.equal(x.end, x.start, `stage ${x.stage} takes time`);
  });

  it('refuses stage 0, a split backward and stages outside the pipeline, and reads stage lists', () => {
    const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 4, splitBackward: false };
    const d = makeDurationModel({ profile: llm, shape, jitter: 'paper', seed: 0 });
    assert.throws(() => freeStages(shape, d, [0]), /stages 1\.\.3 can be freed, got 0/);
    assert.throws(() => freeStages(shape, d, [4]), RelaxError);
    const split = { ...shape, splitBackward: true };
    assert.throws(
      () => freeStages(split, makeDurationModel({ profile: llm, shape: split, jitter: 'paper', seed: 0 }), [1]),
      /split backward/,
    );
    assert.deepEqual(parseStages('1-3', 8), [1, 2, 3]);
    assert.deepEqual(parseStages('7,2,2-3', 8), [2, 3, 7]);
    assert.throws(() => parseStages('0-3', 8), /got 0/);
    assert.throws(() => parseStages('3-1', 8), /backwards/);
    assert.throws(() => parseStages('a', 8), /stage list/);
  });
});
