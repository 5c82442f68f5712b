import { strict as assert } from 'node:assert';
import { AdamW } from '../policies/optim/adamw';
import { NAdamW } from '../policies/optim/nadamw';
import { ParamError, applyUpdates } from '../policies/optim/params';
import { lrAt } from '../policies/optim/schedule';
import { NonFiniteGradientError, clipGradNorm } from '../policies/optim/clip';

const close = (a: number, b: number, rel: number, what: string) =>
  assert.ok(Math.abs(a - b) <= rel * Math.max(Math.abs(b), 1e-12), `${what}: got ${a}, expected ${b}`);

const map = (o: Record<string, number[]>) => new Map(Object.entries(o).map(([k, v]) => [k, Float32Array.from(v)]));

describe('AdamW', () => {
  it('matches two hand-computed steps on a 2-parameter example', () => {
    const opt = new AdamW([{ name: 'p', shape: [2] }], { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 });
    const params = map({ p: [1, -2] });
    // Step 1: g = [0.5, -1], lr 0.1. m = 0.1 g, v = 0.001 g², m̂ = g, v̂ = g².
    let d = opt.propose(params, map({ p: [0.5, -1] }), 0.1).get('p')!;
    close(d[0], -0.1 * 0.01 * 1 - (0.1 * 0.5) / (0.5 + 1e-8), 1e-6, 'step 1, p0');
    close(d[1], -0.1 * 0.01 * -2 - (0.1 * -1) / (1 + 1e-8), 1e-6, 'step 1, p1');
    applyUpdates(params, new Map([['p', d]]));
    const p1 = [params.get('p')![0], params.get('p')![1]];
    // Step 2: g = [0.1, 0.3], lr 0.05.
    const g2 = [0.1, 0.3];
    const g1 = [0.5, -1];
    d = opt.propose(params, map({ p: g2 }), 0.05).get('p')!;
    for (let i = 0; i < 2; i++) {
      const m = 0.9 * (0.1 * g1[i]) + 0.1 * g2[i];
      const v = 0.999 * (0.001 * g1[i] * g1[i]) + 0.001 * g2[i] * g2[i];
      const expected =
        -0.05 * 0.01 * p1[i] - ((0.05 / (1 - 0.81)) * m) / (Math.sqrt(v) / Math.sqrt(1 - 0.999 ** 2) + 1e-8);
      close(d[i], expected, 1e-5, `step 2, p${i}`);
    }
  });

  it('proposes without writing the parameters', () => {
    const opt = new AdamW([{ name: 'w', shape: [3] }]);
    const params = map({ w: [1, 2, 3] });
    opt.propose(params, map({ w: [1, 1, 1] }), 0.1);
    assert.deepEqual([...params.get('w')!], [1, 2, 3]);
  });

  it('skips weight decay for parameters marked decay: false', () => {
    const opt = new AdamW([{ name: 'b', shape: [1], decay: false }], { weightDecay: 0.5 });
    const d = opt.propose(map({ b: [10] }), map({ b: [1] }), 0.1).get('b')!;
    close(d[0], -0.1 / (1 + 1e-8), 1e-6, 'Δ');
  });

  it('reports a direction equal to −Δ/lr of the step just taken', () => {
    const opt = new AdamW([{ name: 'w', shape: [2] }]);
    const params = map({ w: [0.3, -0.7] });
    const d = opt.propose(params, map({ w: [0.2, 0.4] }), 0.01).get('w')!;
    const dir = new Float32Array(2);
    opt.direction('w', params.get('w')!, dir);
    for (let i = 0; i < 2; i++) close(dir[i], -d[i] / 0.01, 1e-6, `direction ${i}`);
  });

  it('rejects a missing gradient, naming it, and leaves its state unchanged', () => {
    const opt = new AdamW([
      { name: 'a', shape: [1] },
      { name: 'b', shape: [1] },
    ]);
    assert.throws(
      () => opt.propose(map({ a: [1], b: [1] }), map({ a: [1] }), 0.1),
      (e: Error) => e instanceof ParamError && /"b"/.test(e.message),
    );
    assert.equal(opt.step, 0);
    assert.equal(opt.state().m.a[0], 0);
  });
});

describe('NAdamW', () => {
  // Reference: PyTorch's documented NAdam with decoupled weight decay, in float64.
  function reference(p0: number, grads: number[], lrs: number[]): number[] {
    const b1 = 0.99,
      b2 = 0.999,
      eps = 1e-8,
      lam = 0.01,
      psi = 0.004;
    let p = p0,
      m = 0,
      v = 0,
      prod = 1;
    const deltas: number[] = [];
    grads.forEach((g, idx) => {
      const t = idx + 1;
      const lr = lrs[idx];
      const before = p;
      p = p - lr * lam * p;
      const mu = b1 * (1 - 0.5 * Math.pow(0.96, t * psi));
      const muNext = b1 * (1 - 0.5 * Math.pow(0.96, (t + 1) * psi));
      prod = prod * mu;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const mHat = (muNext * m) / (1 - prod * muNext) + ((1 - mu) * g) / (1 - prod);
      const vHat = v / (1 - Math.pow(b2, t));
      p = p - (lr * mHat) / (Math.sqrt(vHat) + eps);
      deltas.push(p - before);
    });
    return deltas;
  }

  it('follows the reference sequence derived from PyTorch NAdam(decoupled_weight_decay=True)', () => {
    const grads = [0.3, -0.1, 0.25, 0.05, -0.4, 0.2, 0.1, -0.05];
    const lrs = [1e-3, 2e-3, 3e-3, 3e-3, 2.5e-3, 2e-3, 1e-3, 1e-3];
    const expected = reference(0.8, grads, lrs);
    const opt = new NAdamW([{ name: 'w', shape: [1] }]);
    const params = map({ w: [0.8] });
    grads.forEach((g, i) => {
      const d = opt.propose(params, map({ w: [g] }), lrs[i]);
      close(d.get('w')![0], expected[i], 1e-5, `step ${i + 1}`);
      applyUpdates(params, d);
    });
    assert.equal(opt.step, grads.length);
  });

  it('uses the FRESCO defaults: β1 0.99, β2 0.999, ε 1e-8, weight decay 0.01, ψ 0.004', () => {
    const opt = new NAdamW([{ name: 'w', shape: [1] }]);
    assert.deepEqual(
      [opt.beta1, opt.beta2, opt.eps, opt.weightDecay, opt.momentumDecay],
      [0.99, 0.999, 1e-8, 0.01, 0.004],
    );
    close(opt.mu(1), 0.99 * (1 - 0.5 * 0.96 ** 0.004), 1e-15, 'μ_1');
  });

  it('restores its state bit for bit: a loaded copy proposes the same updates', () => {
    const info = [{ name: 'w', shape: [2, 2] }];
    const a = new NAdamW(info);
    const params = map({ w: [1, 2, 3, 4] });
    a.propose(params, map({ w: [0.1, -0.2, 0.3, 0.4] }), 1e-3);
    a.propose(params, map({ w: [0.2, 0.1, -0.3, 0.0] }), 1e-3);
    const b = new NAdamW(info);
    b.load(a.state());
    const g = map({ w: [0.05, 0.05, -0.1, 0.2] });
    const da = Float32Array.from(a.propose(params, g, 1e-3).get('w')!);
    const db = b.propose(params, g, 1e-3).get('w')!;
    assert.deepEqual([...db], [...da]);
    assert.equal(b.stateBytes(), 2 * 4 * 4);
  });
});

describe('lr schedule', () => {
  const s = { peak: 3e-4, warmupSteps: 100, totalSteps: 1100 };
  it('warms up linearly from 0 to the peak', () => {
    assert.equal(lrAt(s, 0), 0);
    close(lrAt(s, 50), 1.5e-4, 1e-12, 'half warmup');
    assert.equal(lrAt(s, 100), 3e-4);
  });
  it('decays by a cosine to 0.1 × peak at the horizon and stays there', () => {
    close(lrAt(s, 600), 0.55 * 3e-4, 1e-12, 'cosine midpoint');
    close(lrAt(s, 1100), 3e-5, 1e-12, 'horizon');
    close(lrAt(s, 5000), 3e-5, 1e-12, 'after horizon');
    for (let t = 101; t <= 1100; t++) assert.ok(lrAt(s, t) <= lrAt(s, t - 1), `not monotone at ${t}`);
  });
  it('rejects a horizon shorter than the warmup, quoting it', () => {
    assert.throws(() => lrAt({ peak: 1, warmupSteps: 10, totalSteps: 5 }, 1), /got 5/);
  });
});

describe('global-norm clipping', () => {
  it('scales all gradients together when the norm exceeds 1', () => {
    const g = map({ a: [3], b: [0, 4] });
    const r = clipGradNorm(g, 1.0);
    assert.equal(r.norm, 5);
    close(g.get('a')![0], 3 / (5 + 1e-6), 1e-6, 'a');
    close(g.get('b')![1], 4 / (5 + 1e-6), 1e-6, 'b');
  });
  it('leaves gradients under the limit untouched', () => {
    const g = map({ a: [0.3, 0.4] });
    assert.equal(clipGradNorm(g).scale, 1);
    assert.deepEqual([...g.get('a')!], [...Float32Array.from([0.3, 0.4])]);
  });
  it('throws on a non-finite gradient, naming the parameter', () => {
    assert.throws(
      () => clipGradNorm(map({ ok: [1], bad: [NaN] })),
      (e: Error) => e instanceof NonFiniteGradientError && /"bad"/.test(e.message),
    );
  });
});
