import { strict as assert } from 'node:assert';
import { WeightStash } from '../policies/consistency/stash';
import { PipeMare, dampingFactor } from '../policies/consistency/pipemare';
import { WeightPrediction } from '../policies/consistency/predict';
import { NoConsistency } from '../policies/consistency/none';
import { ConsistencyError } from '../policies/consistency/policy';
import { AdamW } from '../policies/optim/adamw';
import { applyUpdates } from '../policies/optim/params';

const params = (w: number[]) => new Map([['w', Float32Array.from(w)]]);
const ctxOf = (p: Map<string, Float32Array>, step: number, lr = 0.1) => ({ params: p, step, lr });

describe('weight stashing', () => {
  it('returns the forward-time weights exactly at backward time, out of order', () => {
    const st = new WeightStash();
    const p = params([1.5, -2.25, 3.125]);
    st.weightsForForward(0, ctxOf(p, 0));
    st.weightsForForward(1, ctxOf(p, 0));
    const v0 = [...p.get('w')!];
    const u = params([0.1, 0.2, 0.3]);
    st.transformUpdate(u, ctxOf(p, 1));
    applyUpdates(p, u);
    st.weightsForForward(2, ctxOf(p, 1));
    const v1 = [...p.get('w')!];
    st.transformUpdate(u, ctxOf(p, 2));
    applyUpdates(p, u);
    assert.equal(st.versionsHeld, 2); // version 0 shared by mbs 0 and 1 is stored once
    assert.equal(st.extraStateBytes(), 2 * 3 * 4);
    assert.deepEqual([...st.weightsForBackward(1, ctxOf(p, 2)).get('w')!], v0);
    st.backward(1);
    assert.deepEqual([...st.weightsForBackward(2, ctxOf(p, 2)).get('w')!], v1);
    st.backward(2);
    assert.deepEqual([...st.weightsForBackward(0, ctxOf(p, 2)).get('w')!], v0);
    st.backward(0);
    assert.equal(st.extraStateBytes(), 0);
  });

  it('copies nothing when no update happens during a flight', () => {
    const st = new WeightStash();
    const p = params([1, 2]);
    st.weightsForForward(0, ctxOf(p, 0));
    assert.equal(st.weightsForBackward(0, ctxOf(p, 0)), p);
    st.backward(0);
    st.transformUpdate(params([1, 1]), ctxOf(p, 1));
    assert.equal(st.extraStateBytes(), 0);
  });

  it('rejects a backward without a forward, naming the microbatch', () => {
    assert.throws(
      () => new WeightStash().backward(4),
      (e: Error) => e instanceof ConsistencyError && /mb 4/.test(e.message),
    );
  });
});

describe('PipeMare', () => {
  it('damps the learning rate by τ^(−p_t), p_t = 1 − min(t/K, 1)', () => {
    assert.equal(dampingFactor(8, 0, 100), 1 / 8);
    assert.ok(Math.abs(dampingFactor(8, 50, 100) - 1 / Math.sqrt(8)) < 1e-15);
    assert.equal(dampingFactor(8, 100, 100), 1);
    assert.equal(dampingFactor(8, 400, 100), 1);
    const pm = new PipeMare({ tau: 4, dampingSteps: 10, correction: false });
    const u = params([1, -2]);
    pm.transformUpdate(u, ctxOf(params([0, 0]), 5));
    assert.deepEqual([...u.get('w')!], [0.5, -1]);
  });

  it('reconstructs the backward weights as w − s·δ with δ the EMA of applied updates', () => {
    const pm = new PipeMare({ tau: 2, dampingSteps: 1, damping: false, D: 0.25 }); // γ = 0.5
    const p = params([10, 20]);
    pm.weightsForForward(0, ctxOf(p, 0));
    const steps = [
      [1, 2],
      [3, 0],
    ];
    steps.forEach((s, i) => {
      const u = params(s);
      pm.transformUpdate(u, ctxOf(p, i + 1));
      applyUpdates(p, u);
    });
    // δ1 = 0.5·[1,2] = [0.5, 1]; δ2 = 0.5·δ1 + 0.5·[3,0] = [1.75, 0.5]; s = 2 updates.
    const w = pm.weightsForBackward(0, ctxOf(p, 2)).get('w')!;
    assert.deepEqual([...w], [14 - 2 * 1.75, 22 - 2 * 0.5]);
    pm.backward(0);
    assert.ok(pm.extraStateBytes() > 0);
  });
});

describe('weight prediction', () => {
  it('runs the forward on w − s·η·direction and the backward on the current weights', () => {
    const opt = new AdamW([{ name: 'w', shape: [2] }], { weightDecay: 0 });
    const p = params([1, 1]);
    applyUpdates(p, opt.propose(p, params([0.5, -0.25]), 0.1));
    const pred = new WeightPrediction({ delay: 3, direction: (n, w, o) => opt.direction(n, w, o) });
    const dir = new Float32Array(2);
    opt.direction('w', p.get('w')!, dir);
    const f = pred.weightsForForward(0, ctxOf(p, 1, 0.1)).get('w')!;
    for (let i = 0; i < 2; i++) assert.equal(f[i], Math.fround(p.get('w')![i] - 3 * 0.1 * dir[i]));
    assert.equal(pred.weightsForBackward(0, ctxOf(p, 1)), p);
  });

  it('predicts the weights after s steps of a steady gradient better than the current weights do', () => {
    const opt = new AdamW([{ name: 'w', shape: [3] }], { weightDecay: 0.01 });
    const p = params([1, -1, 0.5]);
    const g = params([0.3, -0.2, 0.1]);
    for (let i = 0; i < 20; i++) applyUpdates(p, opt.propose(p, g, 0.01));
    const pred = new WeightPrediction({ delay: 4, direction: (n, w, o) => opt.direction(n, w, o) });
    const guess = Float32Array.from(pred.weightsForForward(0, ctxOf(p, 20, 0.01)).get('w')!);
    const now = Float32Array.from(p.get('w')!);
    for (let i = 0; i < 4; i++) applyUpdates(p, opt.propose(p, g, 0.01));
    const later = p.get('w')!;
    const err = (a: Float32Array) => Math.hypot(...a.map((x, i) => x - later[i]));
    assert.ok(err(guess) < 0.05 * err(now), `prediction error ${err(guess)} vs staleness ${err(now)}`);
  });
});

describe('no consistency', () => {
  it('uses the current weights everywhere and leaves updates as proposed', () => {
    const pol = new NoConsistency();
    const p = params([1]);
    const u = params([2]);
    assert.equal(pol.weightsForForward(0, ctxOf(p, 0)), p);
    assert.equal(pol.weightsForBackward(0, ctxOf(p, 0)), p);
    pol.transformUpdate(u, ctxOf(p, 1));
    assert.equal(u.get('w')![0], 2);
    assert.equal(pol.extraStateBytes(), 0);
  });
});
