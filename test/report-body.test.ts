import { strict as assert } from 'assert';
import { reportBodyProblem, requiredReportFields } from '../checks/report-body';

const store = {
  updates: 3,
  inflightBound: 2,
  delay: 1,
  staleness: { mean: 0.5, max: 1, count: 3 },
  stalenessByUpdate: [0, 1, 0],
  extraStateBytes: 128,
  optimizerBytes: 64,
  consistency: 'fresco',
};
const snapshot = { params: { w: new Float32Array(4) }, optimizer: [{ step: 1 }] };

describe('report bodies', () => {
  it('takes what stages send in each mode: emulated, asynchronous, training with losses and a snapshot, a diverged loss', () => {
    assert.equal(reportBodyProblem({ peakInflight: 3 }, []), null);
    assert.equal(reportBodyProblem({ peakInflight: 3, store }, ['store']), null);
    assert.equal(
      reportBodyProblem({ peakInflight: 1, lr: 1e-3, step: 4, loss: 2.5, lossCount: 8, snapshot }, ['loss']),
      null,
    );
    assert.equal(
      reportBodyProblem({ peakInflight: 1, store, snapshot, losses: [2.5, 2.4] }, ['store', 'losses']),
      null,
    );
    assert.equal(reportBodyProblem({ peakInflight: 1, loss: NaN, losses: [Infinity] }, ['loss']), null);
  });

  it('names the field a report lacks or cannot be read from', () => {
    const cases: [Record<string, unknown>, string[], RegExp][] = [
      [{}, [], /has no peakInflight/],
      [{ peakInflight: 1 }, ['store'], /has no store/],
      [{ peakInflight: 1.5 }, [], /peakInflight is not a whole number ≥ 0/],
      [{ peakInflight: 1, store: [] }, [], /store is not a map$/],
      [
        { peakInflight: 1, store: { ...store, staleness: { mean: 'x', max: 1, count: 1 } } },
        [],
        /store is not a map whose staleness is a map whose mean is a finite number/,
      ],
      [
        { peakInflight: 1, store: { ...store, stalenessByUpdate: [0, null] } },
        [],
        /stalenessByUpdate is a list of finite numbers/,
      ],
      [{ peakInflight: 1, store: { ...store, consistency: 7 } }, [], /consistency is text/],
      [{ peakInflight: 1, loss: '2.5' }, [], /loss is not a number/],
      [{ peakInflight: 1, losses: 7 }, [], /losses is not a list of numbers/],
      [
        { peakInflight: 1, snapshot: { params: { w: [1, 2] }, optimizer: [] } },
        [],
        /parameter "w" is not a float32 array/,
      ],
      [
        { peakInflight: 1, snapshot: { params: {} } },
        [],
        /snapshot is not a stage snapshot \(not a map of params \(a map\) and optimizer \(a list\)\)/,
      ],
      [{ peakInflight: 1, step: -1 }, [], /step is not a whole number/],
    ];
    for (const [body, required, want] of cases)
      assert.match(String(reportBodyProblem(body, required)), want, JSON.stringify(body));
  });

  it('asks a store of every asynchronous stage and the loss of the last stage of a training run', () => {
    const train = {} as never;
    assert.deepEqual(requiredReportFields({ mode: 'sync', train: null, stages: 4 }, 3), []);
    assert.deepEqual(requiredReportFields({ mode: 'async', train: null, stages: 4 }, 0), ['store']);
    assert.deepEqual(requiredReportFields({ mode: 'sync', train, stages: 4 }, 2), []);
    assert.deepEqual(requiredReportFields({ mode: 'sync', train, stages: 4 }, 3), ['loss']);
    assert.deepEqual(requiredReportFields({ mode: 'async', train, stages: 4 }, 3), ['store', 'losses']);
  });
});
