import { strict as assert } from 'node:assert';
import { spread } from '../checks/stats';

describe("spread (a measure's median and range)", () => {
  it('gives the median (the mean of the middle two for an even count) and the least and greatest values', () => {
    assert.deepEqual(spread([3, 10, 1, 2]), { median: 2.5, min: 1, max: 10 });
    assert.deepEqual(spread([0.5, 0.1, 0.3]), { median: 0.3, min: 0.1, max: 0.5 });
  });

  it('gives zeros for no values', () => {
    assert.deepEqual(spread([]), { median: 0, min: 0, max: 0 });
  });
});
