import { strict as assert } from 'assert';
import { StoreState, storeStats } from '../actors/param-store-state';

function state(staleness: number[]): StoreState {
  return {
    params: null,
    infos: [],
    optimizer: null,
    policy: null,
    step: staleness.length,
    forwardStep: new Map(),
    staleness,
    peakExtraBytes: 12,
    next: null,
    high: 0,
    skipped: 0,
    floor: 0,
    eras: [
      { policy: 'stash', fromUpdate: 1, swap: null },
      { policy: 'fresco', fromUpdate: 3, swap: 1 },
    ],
  };
}

describe('storeStats', () => {
  it('reports the mean, the max and the count of the staleness, and the policy in force last', () => {
    const st = state([0, 2, 1, 1]);
    const s = storeStats(st, { inflight: 3, delay: 2 });
    assert.deepEqual(s.staleness, { mean: 1, max: 2, count: 4 });
    assert.equal(s.updates, 4);
    assert.equal(s.inflightBound, 3);
    assert.equal(s.delay, 2);
    assert.equal(s.extraStateBytes, 12);
    assert.equal(s.optimizerBytes, 0);
    assert.equal(s.consistency, 'fresco');
    assert.deepEqual(s.stalenessByUpdate, [0, 2, 1, 1]);
    assert.deepEqual(s.consistencyEras, st.eras);
  });

  it('reports copies: later updates do not change a report already made', () => {
    const st = state([1]);
    const s = storeStats(st, { inflight: 2, delay: 1 });
    st.staleness.push(5);
    st.eras.push({ policy: 'stash', fromUpdate: 5, swap: 2 });
    assert.deepEqual(s.stalenessByUpdate, [1]);
    assert.equal(s.consistencyEras.length, 2);
  });

  it('reports a store with no updates yet as staleness 0 of none', () => {
    assert.deepEqual(storeStats(state([]), { inflight: 1, delay: 0 }).staleness, { mean: 0, max: 0, count: 0 });
  });
});
