import { strict as assert } from 'assert';
import { exitStatusOf } from '../base/errors';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { checkTrainTensorParallel, nearestDivisor } from '../models/tp/tp-shape';
import { gptTpModel, mlpTpModel } from '../models/tp/tp-layers';

/** The refusal `fn` throws: a TensorParallelShapeError, exit status 2, with `message`. */
function assertRefused(fn: () => unknown, message: string) {
  assert.throws(fn, (e: Error) => {
    assert.equal(e.name, 'TensorParallelShapeError');
    assert.equal(exitStatusOf(e), 2);
    assert.equal(e.message, message);
    return true;
  });
}

describe('tensor-parallel shapes a model cannot split are refused, naming the numbers and the nearest valid T', () => {
  it('the nearest divisor is the closest one, the smaller on a tie', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 7, 9].map((t) => nearestDivisor(8, t)),
      [1, 2, 2, 4, 4, 8, 8],
    );
    assert.equal(nearestDivisor(6, 4), 3);
  });

  it('gpt: heads not divisible by T', () => {
    const t = { ...TRAIN_DEFAULTS, model: 'gpt' as const, heads: 6, width: 48 };
    assertRefused(
      () => checkTrainTensorParallel(t, 4),
      'gpt: --heads 6 is not divisible by --tp 4, so the heads cannot be split evenly across ranks; the nearest valid --tp is 3 (divisors of 6: 1, 2, 3, 6)',
    );
    assert.doesNotThrow(() => checkTrainTensorParallel(t, 3));
  });

  it('gpt: T larger than the heads', () => {
    const t = { ...TRAIN_DEFAULTS, model: 'gpt' as const, heads: 4, width: 32 };
    assertRefused(
      () => checkTrainTensorParallel(t, 8),
      'gpt: --tp 8 is larger than the 4 attention heads (--heads 4); each rank needs at least one head; the nearest valid --tp is 4 (divisors of 4: 1, 2, 4)',
    );
  });

  it("mlp: the blocks' hidden width not divisible by T", () => {
    const t = { ...TRAIN_DEFAULTS, model: 'mlp' as const, width: 10 };
    assertRefused(
      () => checkTrainTensorParallel(t, 7),
      "mlp: the blocks' hidden width 40 (4 × --width 10) is not divisible by --tp 7; the nearest valid --tp is 8",
    );
    assert.doesNotThrow(() => checkTrainTensorParallel(t, 8));
  });

  it('T that is not a positive integer', () => {
    for (const bad of [0, -2, 1.5])
      assertRefused(() => checkTrainTensorParallel(TRAIN_DEFAULTS, bad), `--tp must be a positive integer, got ${bad}`);
  });

  it('the TP models refuse before they build anything', () => {
    assertRefused(
      () => gptTpModel({ heads: 2, width: 16 }, 3),
      'gpt: --tp 3 is larger than the 2 attention heads (--heads 2); each rank needs at least one head; the nearest valid --tp is 2 (divisors of 2: 1, 2)',
    );
    assertRefused(
      () => mlpTpModel({ width: 8, hidden: 30 }, 4),
      "mlp: the blocks' hidden width 30 is not divisible by --tp 4; the nearest valid --tp is 3",
    );
  });
});
