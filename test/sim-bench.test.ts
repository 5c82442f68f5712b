import { strict as assert } from 'assert';
import { arbiterCosts } from '../bench/sim-policies';
import { median } from '../checks/stats';

describe("the sim benchmark's arbiter cost", () => {
  it("times every policy the same number of times and reports each one's median", () => {
    const policies = ['bf', '1f1b', 'hint:1f1b'];
    const r = arbiterCosts(policies, { stages: 4, chunks: 1, microbatches: 16, splitBackward: false }, 4, 2000);
    assert.deepEqual(Object.keys(r.runs), policies);
    for (const p of policies) {
      assert.equal(r.runs[p].length, 4);
      assert.ok(r.runs[p].every((us) => us > 0 && Number.isFinite(us)));
      assert.equal(r.median[p], median(r.runs[p]));
    }
  });
});
