import { strict as assert } from 'assert';
import { makeDurationModel } from '../models/durations';
import { LaneKey, RankJitter, allReduceMs, laneDurationModel, laneSeed } from '../models/lane-durations';
import { JitterMode } from '../models/jitter';
import { loadProfile } from '../models/profile';
import { PipelineShape, task } from '../policies/task';

const shape: PipelineShape = { stages: 4, chunks: 1, microbatches: 8, splitBackward: false };
const profile = loadProfile('multimodal');
const lane = (rank: number, ranks = 2, replica = 0): LaneKey => ({ rank, ranks, replica });
const model = (l: LaneKey, rankJitter?: RankJitter, seed = 5, jitter: JitterMode = 'paper') =>
  laneDurationModel({ profile, shape, jitter, seed, lane: l, ...(rankJitter ? { rankJitter } : {}) });

/** Every F and B message of 40 iterations: (iteration, stage, task). */
const keys = () => {
  const out: [number, number, ReturnType<typeof task>][] = [];
  for (let it = 0; it < 40; it++)
    for (let s = 0; s < shape.stages; s++)
      for (let mb = 0; mb < shape.microbatches; mb++) {
        if (s + 1 < shape.stages) out.push([it, s, task('F', mb, 0)]);
        if (s > 0) out.push([it, s, task('B', mb, 0)]);
      }
  return out;
};

/** p95 / p5 of rank 1's message delays over rank 0's, message by message. */
function rankRatioSpread(rankJitter: RankJitter, jitter: JitterMode = 'paper'): number {
  const [a, b] = [model(lane(0), rankJitter, 5, jitter), model(lane(1), rankJitter, 5, jitter)];
  const r = keys()
    .map(([it, s, t]) => b.comm(it, s, t) / a.comm(it, s, t))
    .sort((x, y) => x - y);
  return r[Math.floor(0.95 * (r.length - 1))]! / r[Math.floor(0.05 * (r.length - 1))]!;
}

describe('lane durations (a rank of a replica)', () => {
  it("at T = 1 a lane draws exactly the job's own durations, whatever the rank jitter", () => {
    const job = makeDurationModel({ profile, shape, jitter: 'paper', seed: 5 });
    for (const rankJitter of ['shared', 'independent'] as const) {
      const one = model(lane(0, 1), rankJitter);
      for (const [it, s, t] of keys().slice(0, 200)) {
        assert.equal(one.comm(it, s, t), job.comm(it, s, t));
        assert.equal(one.compute(it, s, t), job.compute(it, s, t));
      }
    }
  });

  it("shared: a group's ranks share each message's delay up to a small per-rank part; independent: each draws it whole", () => {
    // The per-rank part has the compute jitter's spread (0.73): the ratio of two ranks' delays
    // stays within a factor ~3 at p95/p5. Independent heavy-tailed draws (spread 58.74) differ by orders of magnitude.
    const shared = rankRatioSpread('shared');
    const independent = rankRatioSpread('independent');
    assert.ok(shared > 1.2 && shared < 4, `shared: p95/p5 of the ranks' delay ratio ${shared}`);
    assert.ok(independent > 1000, `independent: p95/p5 of the ranks' delay ratio ${independent}`);
  });

  it("shared is the default; independent draws what the lane's own seed draws; compute is per rank in both", () => {
    const [it, s, t] = [3, 1, task('F', 2, 0)];
    assert.equal(model(lane(1)).comm(it, s, t), model(lane(1), 'shared').comm(it, s, t));
    const own = makeDurationModel({ profile, shape, jitter: 'paper', seed: laneSeed(5, lane(1)) });
    assert.equal(model(lane(1), 'independent').comm(it, s, t), own.comm(it, s, t));
    for (const rankJitter of ['shared', 'independent'] as const) {
      const [a, b] = [model(lane(0), rankJitter), model(lane(1), rankJitter)];
      assert.notEqual(a.compute(it, s, t), b.compute(it, s, t), rankJitter);
      assert.equal(b.compute(it, s, t), own.compute(it, s, t) / 2, `${rankJitter}: a rank computes 1/T of its stage`);
    }
  });

  it("shared: replicas draw their groups' delays apart; the per-rank part follows the compute jitter, without communication jitter too", () => {
    const [it, s, t] = [2, 0, task('F', 1, 0)];
    assert.notEqual(model(lane(0, 2, 0)).comm(it, s, t), model(lane(0, 2, 1)).comm(it, s, t));
    // --jitter compute: the group's draw is the undisturbed delay, and each rank multiplies it by its own part.
    const spread = rankRatioSpread('shared', 'compute');
    assert.ok(spread > 1.2 && spread < 4, `compute: p95/p5 of the ranks' delay ratio ${spread}`);
    // --jitter none: no per-rank part, every rank's delay is the base one.
    const calm = (rank: number) => model(lane(rank), 'shared', 5, 'none').comm(it, s, t);
    assert.equal(calm(0), calm(1));
    assert.equal(calm(0), makeDurationModel({ profile, shape, jitter: 'none', seed: 5 }).baseComm(s, t));
  });

  it('costs a ring all-reduce 2(T−1) latencies and 2(T−1)/T of the bytes, nothing for one rank', () => {
    const { latencyMs, bandwidthGBps } = profile.communication;
    assert.equal(allReduceMs(profile, 1e6, 1), 0);
    const want = 2 * latencyMs + (1e6 / (bandwidthGBps * 1e6)) * 1;
    assert.ok(Math.abs(allReduceMs(profile, 1e6, 2) - want) < 1e-12);
  });
});
