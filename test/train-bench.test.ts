import { strict as assert } from 'assert';
import { benchTrainThroughput, roundOrder } from '../bench/train-throughput';
import { median } from '../checks/stats';
import { assertAlternates } from './helpers-bench';

describe('the train benchmark', function () {
  this.timeout(300000);

  it('alternates which setup runs first, so each goes first in half the rounds', () => {
    assertAlternates(roundOrder, 'single', 'pipeline');
  });

  it('takes the ceiling of a round as two child trainings at once over one such child alone', async () => {
    const r = await benchTrainThroughput({ rounds: 2, iterations: 2, layers: 2, microbatchSize: 2 });
    assert.equal(r.rounds_detail.length, 2);
    for (const x of r.rounds_detail) {
      assert.ok(x.oneChild! > 0 && x.twoSingles! > 0, JSON.stringify(x));
      assert.equal(x.ceiling, x.twoSingles! / x.oneChild!);
      assert.equal(x.ratio, x.pipeline / x.single);
    }
    assert.equal(r.speedup, median(r.rounds_detail.map((x) => x.ratio)));
    assert.equal(r.ceiling, median(r.rounds_detail.map((x) => x.ceiling!)));
  });
});
