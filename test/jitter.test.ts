import { strict as assert } from 'assert';
import { PAPER_SPREAD, jitterSigmas, lognormalMultiplier, sigmaForSpread, spreadForSigma } from '../models/jitter';
import { DrawKey, keyHash, keyedNormal } from '../models/keyed-random';

function quantile(sorted: Float64Array, p: number): number {
  const x = p * (sorted.length - 1);
  const lo = Math.floor(x);
  return sorted[lo] + (sorted[Math.min(lo + 1, sorted.length - 1)] - sorted[lo]) * (x - lo);
}

/** (p95 - p5) / p50 of `n` keyed multipliers. */
function empiricalSpread(sigma: number, n: number, seed: number): number {
  const xs = new Float64Array(n);
  for (let i = 0; i < n; i++)
    xs[i] = lognormalMultiplier(
      sigma,
      keyedNormal({ seed, iteration: i >> 10, stage: (i >> 4) & 63, event: 'F', mb: i & 15, chunk: 0 }),
    );
  xs.sort();
  return (quantile(xs, 0.95) - quantile(xs, 0.05)) / quantile(xs, 0.5);
}

const key = (over: Partial<DrawKey> = {}): DrawKey => ({
  seed: 7,
  iteration: 3,
  stage: 2,
  event: 'B',
  mb: 5,
  chunk: 1,
  ...over,
});

describe('jitter', () => {
  it('solves sigma in closed form so that the spread comes back exactly', () => {
    for (const s of [0, 0.1, 0.73, 5, 58.74])
      assert.ok(Math.abs(spreadForSigma(sigmaForSpread(s)) - s) < 1e-9 * (1 + s));
    assert.ok(Math.abs(sigmaForSpread(0.73) - 0.2172) < 1e-3);
    assert.ok(Math.abs(sigmaForSpread(58.74) - 2.4764) < 1e-3);
  });

  it('matches the paper spread of compute draws within 3 percent', () => {
    const got = empiricalSpread(jitterSigmas('compute').compute, 100_000, 1);
    assert.ok(Math.abs(got / PAPER_SPREAD.compute - 1) < 0.03, `compute spread ${got}`);
  });

  it('matches the paper spread of communication draws within 3 percent', () => {
    const got = empiricalSpread(jitterSigmas('paper').communication, 100_000, 2);
    assert.ok(Math.abs(got / PAPER_SPREAD.communication - 1) < 0.03, `communication spread ${got}`);
  });

  it('multiplies the target spread by jitterScale', () => {
    const got = empiricalSpread(jitterSigmas('compute', 2).compute, 100_000, 3);
    assert.ok(Math.abs(got / (2 * PAPER_SPREAD.compute) - 1) < 0.03, `doubled compute spread ${got}`);
  });

  it('jitters nothing in none mode or at scale 0, only compute in compute mode, both in paper mode', () => {
    assert.deepEqual(jitterSigmas('none'), { compute: 0, communication: 0 });
    assert.deepEqual(jitterSigmas('paper', 0), { compute: 0, communication: 0 });
    const c = jitterSigmas('compute');
    assert.ok(c.compute > 0 && c.communication === 0);
    const p = jitterSigmas('paper');
    assert.ok(p.compute === c.compute && p.communication > 1);
    assert.equal(lognormalMultiplier(0, 3), 1);
  });

  it('rejects an unknown mode and a negative scale, quoting them', () => {
    assert.throws(() => jitterSigmas('wild' as never), /jitter must be one of none, compute, paper, got "wild"/);
    assert.throws(() => jitterSigmas('paper', -1), /jitterScale must be a finite number >= 0, got -1/);
  });
});

describe('keyed draws', () => {
  it('give the same value for the same key', () => {
    assert.equal(keyedNormal(key()), keyedNormal(key()));
    assert.equal(keyHash(key(), 1), keyHash({ ...key() }, 1));
  });

  it('do not depend on the order they are asked for', () => {
    const keys = Array.from({ length: 200 }, (_, i) => key({ mb: i % 20, stage: Math.floor(i / 20) }));
    const forward = keys.map(keyedNormal);
    const backward = [...keys].reverse().map(keyedNormal).reverse();
    assert.deepEqual(backward, forward);
  });

  it('change with every field of the key, including a seed above 2^32', () => {
    const z = keyedNormal(key());
    for (const over of [{ seed: 8 }, { iteration: 4 }, { stage: 3 }, { event: 'F' as const }, { mb: 6 }, { chunk: 0 }])
      assert.notEqual(keyedNormal(key(over)), z, JSON.stringify(over));
    assert.notEqual(keyedNormal(key({ seed: 7 + 2 ** 32 })), z);
  });

  it('differ between seeds across a whole iteration', () => {
    let same = 0;
    for (let mb = 0; mb < 500; mb++)
      if (keyedNormal(key({ mb, seed: 1 })) === keyedNormal(key({ mb, seed: 2 }))) same++;
    assert.equal(same, 0);
  });

  it('are standard normal and uncorrelated between neighbouring microbatches', () => {
    const n = 50_000;
    let sum = 0,
      sq = 0,
      lag = 0,
      prev = 0,
      below = 0;
    for (let i = 0; i < n; i++) {
      const z = keyedNormal(key({ mb: i }));
      sum += z;
      sq += z * z;
      lag += z * prev;
      prev = z;
      if (z < -1.6448536269514722) below++;
    }
    assert.ok(Math.abs(sum / n) < 0.02, `mean ${sum / n}`);
    assert.ok(Math.abs(sq / n - 1) < 0.03, `variance ${sq / n}`);
    assert.ok(Math.abs(lag / n) < 0.02, `lag-1 correlation ${lag / n}`);
    assert.ok(Math.abs(below / n - 0.05) < 0.005, `P(z < z5) ${below / n}`);
  });

  it('rejects a key whose fields do not fit the hash', () => {
    assert.throws(() => keyedNormal(key({ mb: 1.5 })), /draw key mb must be a 32-bit integer, got 1\.5/);
    assert.throws(
      () => keyedNormal(key({ iteration: 2 ** 32 + 3 })),
      /draw key iteration must be a 32-bit integer, got 4294967299/,
    );
    assert.throws(
      () => keyedNormal(key({ seed: 2 ** 60 })),
      /draw key seed must be a safe integer, got 1152921504606847000/,
    );
    assert.throws(() => keyedNormal(key({ event: 'toString' as never })), /draw key event must be one of/);
    assert.throws(
      () => keyedNormal(key({ event: 'X' as never })),
      /draw key event must be one of F, B, W, send-activation, send-gradient, rank-send-activation, rank-send-gradient, got "X"/,
    );
  });
});
