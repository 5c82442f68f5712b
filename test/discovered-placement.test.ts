import { strict as assert } from 'assert';
import { DEFAULTS, JobConfig } from '../job/config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { placeOnMeasured, unplacedBecause } from '../job/discovered-placement';

const TRAIN: JobConfig = { ...DEFAULTS, stages: 3, train: TRAIN_DEFAULTS };
const nodes = (...g: number[]) => g.map((gflops_stage, k) => ({ node: `n${k}`, gflops_stage }));

describe('placement on the speeds agents measured', () => {
  it('gives the heaviest stage the fastest node, speeds relative to the fastest to three digits', () => {
    // Stage 2 is the heaviest (it holds the head), stage 0 the lightest.
    const placed = placeOnMeasured(TRAIN, nodes(2.0, 6.0, 3.0), [1, 2, 5]);
    assert.deepEqual(placed.placement, ['n0', 'n2', 'n1']);
    assert.deepEqual(placed.stageSpeeds, [0.333, 0.5, 1]);
    assert.equal(placed.partition, TRAIN.partition);
  });

  it('places only a training job of one node per stage, one rank and one replica, with every speed measured', () => {
    assert.equal(unplacedBecause(TRAIN, nodes(1, 2, 3)), null);
    assert.equal(unplacedBecause({ ...TRAIN, train: null }, nodes(1, 2, 3)), 'emulated compute');
    assert.match(unplacedBecause(TRAIN, nodes(1, 2)) ?? '', /2 nodes for 3 stages/);
    assert.match(unplacedBecause({ ...TRAIN, tp: 2 }, nodes(1, 2, 3)) ?? '', /ranks or replicas/);
    assert.match(unplacedBecause({ ...TRAIN, stageSpeeds: [1, 1, 1] }, nodes(1, 2, 3)) ?? '', /flags/);
    assert.match(unplacedBecause({ ...TRAIN, placement: ['a', 'b', 'c'] }, nodes(1, 2, 3)) ?? '', /flags/);
    assert.match(unplacedBecause(TRAIN, nodes(1, 0, 3)) ?? '', /n1 reports no speed/);
  });
});
