import { strict as assert } from 'node:assert';
import { checkHostRecovery } from '../job/stage-recovery';

const stageSnap = { params: { w: Float32Array.from([1, 2]) }, optimizer: [{ step: 0, m: {}, v: {} }] };

describe("checkHostRecovery (a host request's recovery field)", () => {
  it('takes a synchronous stage snapshot as the resume of a synchronous job', () => {
    const r = checkHostRecovery({ stateEvery: 1, resume: { '0': stageSnap } }, 2, false);
    assert.equal(r?.resume?.['0'], stageSnap);
  });

  it("refuses, before any stage is built, an asynchronous job's resume entry that is not an asynchronous snapshot", () => {
    assert.throws(
      () => checkHostRecovery({ stateEvery: 1, resume: { '1': stageSnap } }, 2, true),
      /host: recovery resume for stage 1 is not an asynchronous snapshot \(its updates is undefined, not a count\)/,
    );
    const snap = { ...stageSnap, updates: 3, next: 2, skipped: 0, staleness: [0, 0, 0] };
    assert.throws(
      () => checkHostRecovery({ stateEvery: 1, resume: { '0': snap } }, 2, true),
      /exceed its next microbatch 2/,
    );
    const good = { ...snap, next: 3 };
    assert.equal(checkHostRecovery({ stateEvery: 1, resume: { '0': good } }, 2, true)?.resume?.['0'], good);
  });

  it('refuses a resume entry naming a stage the job does not have', () => {
    assert.throws(() => checkHostRecovery({ stateEvery: 1, resume: { '2': stageSnap } }, 2, false), /names stage "?2/);
  });
});

describe("checkHostRecovery's stateEvery", () => {
  it('takes an interval of 0 (no states) or more and refuses anything else, naming it', () => {
    assert.deepEqual(checkHostRecovery({ stateEvery: 0 }, 2, false), { stateEvery: 0 });
    assert.deepEqual(checkHostRecovery({ stateEvery: 8 }, 2, false), { stateEvery: 8 });
    for (const bad of [-1, 1.5, '8', true, undefined, 2 ** 60])
      assert.throws(
        () => checkHostRecovery({ stateEvery: bad }, 2, false),
        /host: recovery stateEvery must be an integer >= 0, got/,
      );
    assert.throws(() => checkHostRecovery({ keepState: true }, 2, false), /unknown field "keepState"/);
  });
});
