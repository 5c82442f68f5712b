import { strict as assert } from 'assert';
import { asyncResumePlan, belowFloor, lostUpdates } from '../job/async-resume';

describe('asyncResumePlan and lostUpdates (which updates a recovery of an asynchronous job loses)', () => {
  it('resumes the stream one past the highest microbatch any kept state has applied, each stage skipping what it has not', () => {
    // Stage 1 snapshotted after 8 updates (microbatches 0-7), stage 0 after 4 with microbatch 4 still in flight then.
    const plan = asyncResumePlan(
      [
        { updates: 4, next: 4, skipped: 0 },
        { updates: 8, next: 8, skipped: 0 },
      ],
      32,
    );
    assert.equal(plan.next, 8);
    assert.deepEqual(plan.skipped, [4, 0]);
    assert.deepEqual(plan.resumed, [
      { updates: 4, next: 8, skipped: 4 },
      { updates: 8, next: 8, skipped: 0 },
    ]);
  });

  it('counts a microbatch in flight at a snapshot (applied later, out of order) as skipped, not twice', () => {
    // Updated with 0-5 and 7 (7 overtook 6): seven updates before next = 8, microbatch 6 in flight.
    const plan = asyncResumePlan([{ updates: 7, next: 8, skipped: 0 }], 32);
    assert.equal(plan.next, 8);
    assert.deepEqual(plan.skipped, [1]);
  });

  it('counts only what a second recovery adds to the skips a stage resumed with', () => {
    const first = asyncResumePlan(
      [
        { updates: 0, next: 0, skipped: 0 },
        { updates: 4, next: 4, skipped: 0 },
      ],
      16,
    );
    assert.deepEqual(first.skipped, [4, 0]);
    // Stage 0 sent no snapshot since: it resumes with the counts of the first plan again.
    const second = asyncResumePlan([first.resumed[0], { updates: 8, next: 8, skipped: 0 }], 16);
    assert.equal(second.next, 8);
    assert.deepEqual(second.skipped, [4, 0]);
    assert.deepEqual(second.resumed[0], { updates: 0, next: 8, skipped: 8 });
  });

  it('resumes at the last microbatch when some state has the whole stream, and that stage does not apply it again', () => {
    const plan = asyncResumePlan(
      [
        { updates: 12, next: 13, skipped: 0 },
        { updates: 16, next: 16, skipped: 0 },
      ],
      16,
    );
    assert.equal(plan.next, 15);
    assert.deepEqual(plan.resumed[1], { updates: 16, next: 16, skipped: 0 });
    assert.deepEqual(plan.resumed[0], { updates: 12, next: 15, skipped: 3 });
    assert.deepEqual(plan.skipped, [3, 0]);
  });

  it('refuses counts that cannot be (more applied and skipped than came before next, or past the stream)', () => {
    assert.throws(() => asyncResumePlan([{ updates: 5, next: 4, skipped: 0 }], 16), /stage 0: 5 updates/);
    assert.throws(() => asyncResumePlan([{ updates: 2, next: 20, skipped: 0 }], 16), /of 16/);
    assert.throws(() => asyncResumePlan([], 0), /a stream of 0/);
  });

  it('counts as lost the updates a stage made past the state it resumes from, by the backwards its trace showed', () => {
    // Stage 0 began the attempt at 4 updates, showed 9 more backwards, resumes from its snapshot at 8.
    assert.deepEqual(lostUpdates([4, 4], [9, 3], [0, 0], [8, 8]), [5, 0]);
  });

  it('does not count as lost the backwards a resumed stage ran below its floor, over two successive recoveries', () => {
    // Stage 1's state has the whole stream: the first recovery resumes at microbatch 15, above stage 1's floor of 16.
    const first = asyncResumePlan(
      [
        { updates: 12, next: 13, skipped: 0 },
        { updates: 16, next: 16, skipped: 0 },
      ],
      16,
    );
    assert.equal(first.next, 15);
    assert.deepEqual(belowFloor(first), [0, 1]);
    assert.deepEqual(lostUpdates([0, 0], [14, 16], [0, 0], [12, 16]), [2, 0]);
    // The second attempt feeds microbatch 15 to both: stage 0 applies it (its last snapshot has it), stage 1's
    // backward of it makes no update, yet shows in the trace.
    const second = asyncResumePlan([{ updates: 13, next: 16, skipped: 3 }, first.resumed[1]], 16);
    const start = first.resumed.map((c) => c.updates);
    const from = [13, 16];
    assert.deepEqual(lostUpdates(start, [1, 1], belowFloor(first), from), [0, 0]);
    // Counting every backward as an update would have lost one of stage 1's.
    assert.deepEqual(lostUpdates(start, [1, 1], [0, 0], from), [0, 1]);
    assert.deepEqual(belowFloor(second), [1, 1]);
  });
});
