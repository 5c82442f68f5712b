import { strict as assert } from 'assert';
import { DEFAULTS, JobConfig } from '../job/config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { placeOnMeasured, unplacedBecause } from '../job/discovered-placement';
import { planJob } from '../job/job-plan';

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

  it('gives every stage actor of a wide job a node, a TP group nodes of like speed, the heaviest stage the fastest', () => {
    // P=2 × T=2 × D=2: block order replica, rank, stage; stage 1 is the heavier.
    const wide = { ...TRAIN, stages: 2, tp: 2, dp: 2 };
    const placed = placeOnMeasured(wide, nodes(5, 1, 8, 2, 7, 3, 6, 4), [1, 3]);
    // Fastest first: n2 8, n4 7, n6 6, n0 5 | n7 4, n5 3, n3 2, n1 1.
    assert.deepEqual(placed.placement, ['n7', 'n2', 'n5', 'n4', 'n3', 'n6', 'n1', 'n0']);
    // Split evenly: a rank's share of a stage is cut where the even partition cuts.
    assert.equal(placed.stageSpeeds, null);
    assert.doesNotThrow(() => planJob(placed));
    assert.throws(
      () => planJob({ ...wide, placement: ['a', 'b', 'c'] }),
      /3 entries for 2 stages \(or 8 stage actors\)/,
    );
  });

  it('places only a training job of one node per stage actor, with every speed measured', () => {
    assert.equal(unplacedBecause(TRAIN, nodes(1, 2, 3)), null);
    assert.equal(unplacedBecause({ ...TRAIN, train: null }, nodes(1, 2, 3)), 'emulated compute');
    assert.match(unplacedBecause(TRAIN, nodes(1, 2)) ?? '', /2 nodes for 3 stage actors/);
    assert.match(
      unplacedBecause({ ...TRAIN, tp: 2 }, nodes(1, 2, 3)) ?? '',
      /3 nodes for 6 stage actors \(stages × ranks × replicas\)/,
    );
    assert.equal(unplacedBecause({ ...TRAIN, tp: 2 }, nodes(1, 2, 3, 4, 5, 6)), null);
    assert.match(unplacedBecause({ ...TRAIN, stageSpeeds: [1, 1, 1] }, nodes(1, 2, 3)) ?? '', /flags/);
    assert.match(unplacedBecause({ ...TRAIN, placement: ['a', 'b', 'c'] }, nodes(1, 2, 3)) ?? '', /flags/);
    assert.match(unplacedBecause(TRAIN, nodes(1, 0, 3)) ?? '', /n1 reports no speed/);
  });
});
