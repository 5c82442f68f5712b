import { strict as assert } from 'node:assert';
import { SpecTrain } from '../policies/consistency/spectrain';
import { LinearWeightPrediction } from '../policies/consistency/lwp';
import { ProjectionControl } from '../policies/consistency/projection-control';
import { augment, extractBasis } from '../policies/consistency/fresco';
import { dampingFactor } from '../policies/consistency/pipemare';
import { applyUpdates } from '../policies/optim/params';
import { ActorRuntime } from '../actors/runtime';
import { VirtualClock } from '../base/clock';
import { ASYNC_DEFAULTS } from '../job/defaults';
import {
  AsyncSettings,
  CONSISTENCY_ALIASES,
  ConsistencyName,
  StoreMsg,
  StoreStats,
  canonicalConsistency,
  spawnParamStore,
} from '../actors/param-store';

const params = (w: number[]) => new Map([['w', Float32Array.from(w)]]);
const ctxOf = (p: Map<string, Float32Array>, step: number, lr: number) => ({ params: p, step, lr });

/** Applies `steps` (Δ, lr) through a policy's transformUpdate, as the store does. */
function history(
  pol: { transformUpdate: SpecTrain['transformUpdate'] },
  p: Map<string, Float32Array>,
  steps: [number[], number][],
) {
  steps.forEach(([d, lr], i) => {
    const u = params(d);
    pol.transformUpdate(u, ctxOf(p, i + 1, lr));
    applyUpdates(p, u);
  });
}

describe("the paper's baselines: defining properties", () => {
  it("names: the paper's names, and the old ones as aliases of the same methods", () => {
    assert.deepEqual(CONSISTENCY_ALIASES, { none: 'inconsistent', pipemare: 'recovery', predict: 'pipeoptim' });
    for (const n of ['inconsistent', 'stash', 'recovery', 'spectrain', 'pipeoptim', 'lwp', 'fresco'] as const)
      assert.equal(canonicalConsistency(n), n);
  });

  it('SpecTrain: the forward runs on w − s·η·v̂, v̂ the bias-corrected γ-EMA of the past steps per unit lr; the backward on the current weights', () => {
    const st = new SpecTrain({ delay: 3, gamma: 0.5 });
    const p = params([1, 2]);
    // Steps Δ at lr η: −Δ/η = [2, −4] then [6, 0].
    history(st, p, [
      [[-0.2, 0.4], 0.1],
      [[-1.2, 0], 0.2],
    ]);
    // v = 0.5·(0.5·[2,−4]) + 0.5·[6,0] = [3.5, −1]; bias 1 − 0.5² = 0.75: v̂ = [14/3, −4/3].
    const vhat = [14 / 3, -4 / 3];
    assert.deepEqual(
      [...st.velocity('w')!].map((x) => Math.round(x * 1e5) / 1e5),
      vhat.map((x) => Math.round(x * 1e5) / 1e5),
    );
    const w = [...p.get('w')!];
    const f = st.weightsForForward(0, ctxOf(p, 2, 0.05)).get('w')!;
    for (let i = 0; i < 2; i++)
      assert.ok(
        Math.abs(f[i]! - (w[i]! - 3 * 0.05 * vhat[i]!)) < 1e-6,
        `component ${i}: ${f[i]} vs ${w[i]! - 3 * 0.05 * vhat[i]!}`,
      );
    assert.equal(st.weightsForBackward(0, ctxOf(p, 2, 0.05)), p);
    assert.equal(st.extraStateBytes(), 2 * 2 * 4, 'v and the prediction buffer');
  });

  it('SpecTrain predicts a steadily moving weight exactly, where the current weight lags by s steps', () => {
    const st = new SpecTrain({ delay: 4, gamma: 0.9 });
    const p = params([0]);
    history(
      st,
      p,
      Array.from({ length: 30 }, () => [[0.01], 0.1] as [number[], number]),
    );
    const f = st.weightsForForward(0, ctxOf(p, 30, 0.1)).get('w')![0]!;
    assert.ok(Math.abs(f - (p.get('w')![0]! + 4 * 0.01)) < 1e-6, `${f}`);
  });

  it('LWP: the forward runs on w − s·η·v with v the last step per unit lr alone; the backward on the current weights', () => {
    const lwp = new LinearWeightPrediction({ delay: 2 });
    const p = params([1, -1]);
    assert.equal(lwp.weightsForForward(0, ctxOf(p, 0, 0.1)), p, 'no step yet: nothing to extrapolate');
    history(lwp, p, [
      [[5, 5], 0.1],
      [[-0.02, 0.04], 0.2],
    ]); // last: −Δ/η = [0.1, −0.2]
    const w = [...p.get('w')!];
    const f = lwp.weightsForForward(0, ctxOf(p, 2, 0.3)).get('w')!;
    for (let i = 0; i < 2; i++) assert.ok(Math.abs(f[i]! - (w[i]! - 2 * 0.3 * [0.1, -0.2][i]!)) < 1e-6);
    assert.equal(lwp.weightsForBackward(0, ctxOf(p, 2, 0.3)), p);
  });

  it('SpecTrain and LWP differ on a history that turns: one smooths, the other follows the last step', () => {
    const st = new SpecTrain({ delay: 1, gamma: 0.9 });
    const lwp = new LinearWeightPrediction({ delay: 1 });
    const steps: [number[], number][] = [
      [[1], 1],
      [[1], 1],
      [[-1], 1],
    ];
    const p1 = params([0]),
      p2 = params([0]);
    history(st, p1, steps);
    history(lwp, p2, steps);
    const a = st.weightsForForward(0, ctxOf(p1, 3, 1)).get('w')![0]!;
    const b = lwp.weightsForForward(0, ctxOf(p2, 3, 1)).get('w')![0]!;
    assert.equal(b, 1 - 1, 'LWP: one more step of −1');
    assert.ok(a > 1, `SpecTrain: the smoothed velocity still points up (${a})`);
  });

  it('projection control: an update is projected against the τ microbatches that finished before it, never the current one', () => {
    const din = 6,
      dout = 8,
      n = 2; // k = min(τn, ⌈α·min(dout, din + 1)⌉) = 4 = τn: exact
    const layers = [{ layer: 'l', weight: 'W', bias: 'b', layout: 'in-out' as const, dout, din }];
    const pc = new ProjectionControl({ layers, tau: new Map([['l', 2]]), alpha: 1 });
    let r = 12345;
    const rand = () => ((r = (r * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
    const x = (_seed: number) => Float32Array.from({ length: n * din }, rand);
    const update = () =>
      new Map([
        ['W', Float32Array.from({ length: din * dout }, (_, i) => Math.cos(i))],
        ['b', Float32Array.from({ length: dout }, (_, i) => 0.5 - 0.25 * i)],
      ]);
    const outputOf = (u: Map<string, Float32Array>, xs: Float32Array) => {
      const W = u.get('W')!,
        b = u.get('b')!;
      let m = 0;
      for (let r = 0; r < n; r++)
        for (let o = 0; o < dout; o++) {
          let v = b[o]!;
          for (let i = 0; i < din; i++) v += xs[r * din + i]! * W[i * dout + o]!;
          m = Math.max(m, Math.abs(v));
        }
      return m;
    };
    const ctx = ctxOf(params([0]), 1, 0.1);
    const inputs = [x(1), x(2), x(3), x(4)];
    const seen: Map<string, Float32Array>[] = [];
    inputs.forEach((xi, mb) => {
      pc.forward(mb, new Map([['l', { x: xi, n }]]));
      pc.backward(mb);
      const u = update();
      pc.transformUpdate(u, ctx);
      seen.push(u);
    });
    assert.ok(outputOf(seen[0]!, inputs[0]!) > 0.1, 'the first update has nothing finished before it: as proposed');
    // Update 3 protects microbatches 1 and 2 (the two before it), not 3 itself nor 0.
    assert.ok(
      outputOf(seen[3]!, inputs[1]!) < 1e-5 && outputOf(seen[3]!, inputs[2]!) < 1e-5,
      'the recent ones are protected',
    );
    assert.ok(outputOf(seen[3]!, inputs[3]!) > 0.1, 'the current one is not');
    assert.ok(outputOf(seen[3]!, inputs[0]!) > 0.1, 'one older than τ is not');
    assert.deepEqual(pc.recentFor('l'), [2, 3]);
    assert.equal(extractBasis(augment(inputs[0]!, n, din, true), 2).k, 2);
  });

  describe('in the parameter store', () => {
    const infos = [{ name: 'w', shape: [3] }];
    /** One update at a stage with `bound` in flight (mb 1's backward while mb 0 is in flight): the applied Δ. */
    async function oneUpdate(settings: Partial<AsyncSettings>, bound: number, delay: number) {
      const runtime = new ActorRuntime(new VirtualClock());
      const p = new Map([['w', Float32Array.from([1, 2, 3])]]);
      const before = Float32Array.from(p.get('w')!);
      const store = spawnParamStore({
        runtime,
        stage: 0,
        inflightBound: bound,
        delay,
        settings: { ...ASYNC_DEFAULTS, lr: 0.1, warmup: 0, totalUpdates: 100, pipemareSteps: 10, ...settings },
        params: p,
        infos,
      });
      for (const mb of [0, 1]) {
        await runtime.ask<StoreMsg, unknown>(store, (reply) => ({ type: 'weights', purpose: 'forward', mb, reply }));
        runtime.send(store, { type: 'forward-ran', mb });
      }
      runtime.send(store, {
        type: 'backward-ran',
        mb: 1,
        grads: new Map([['w', Float32Array.from([0.3, -0.2, 0.1])]]),
      });
      // A forward after the update: the predictors build their prediction buffers here.
      await runtime.ask<StoreMsg, unknown>(store, (reply) => ({ type: 'weights', purpose: 'forward', mb: 2, reply }));
      runtime.send(store, { type: 'forward-ran', mb: 2 });
      const after = await runtime.ask<StoreMsg, Map<string, Float32Array>>(store, (reply) => ({
        type: 'params',
        reply,
      }));
      const stats = await runtime.ask<StoreMsg, StoreStats>(store, (reply) => ({ type: 'stats', reply }));
      runtime.shutdown();
      return { delta: [...after.get('w')!].map((v, i) => v - before[i]!), stats };
    }

    for (const method of ['inconsistent', 'stash', 'spectrain', 'lwp', 'pipeoptim'] as ConsistencyName[]) {
      it(`LRD damps ${method}'s update by τ^(−p_t) (τ = the stage's delay), for any method`, async () => {
        const plain = await oneUpdate({ consistency: method }, 4, 3);
        const damped = await oneUpdate({ consistency: method, lrd: true }, 4, 3);
        const f = dampingFactor(3, 1, 10);
        plain.delta.forEach((d, i) =>
          assert.ok(Math.abs(damped.delta[i]! - f * d) < 1e-6, `${damped.delta[i]} vs ${f} × ${d}`),
        );
        assert.ok(f < 0.5);
      });
    }

    it('the old PipeMare damping flag is LRD with Recovery, and nothing with another method', async () => {
      const lrd = await oneUpdate({ consistency: 'recovery', lrd: true }, 4, 3);
      const old = await oneUpdate({ consistency: 'pipemare', pipemareDamping: true }, 4, 3);
      assert.deepEqual(old.delta, lrd.delta);
      assert.deepEqual(
        (await oneUpdate({ consistency: 'none', pipemareDamping: true }, 4, 3)).delta,
        (await oneUpdate({ consistency: 'none' }, 4, 3)).delta,
      );
    });

    it('every method keeps its buffers only where something is in flight at an update', async () => {
      for (const method of ['stash', 'recovery', 'spectrain', 'pipeoptim', 'lwp'] as ConsistencyName[]) {
        assert.ok((await oneUpdate({ consistency: method }, 4, 3)).stats.extraStateBytes > 0, method);
        assert.equal(
          (await oneUpdate({ consistency: method }, 1, 0)).stats.extraStateBytes,
          0,
          `${method} with one in flight`,
        );
      }
    });
  });
});
