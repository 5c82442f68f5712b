import { strict as assert } from 'node:assert';
import {
  Fresco,
  FrescoError,
  PROJECTION_BLOCK_ROWS,
  WeightLayout,
  augment,
  exactTopK,
  extractBasis,
  mergeBases,
  project,
  projectInPlace,
  singularValues,
} from '../policies/consistency/fresco';
import { FrescoPolicy } from '../policies/consistency/fresco-policy';
import { householderQ, orthonormalSpan } from '../policies/consistency/qr';
import { frobenius, mulAB, mulAtB, pseudoRandomBlock } from '../policies/consistency/linalg';

const rand = (n: number, seed: number) => Float32Array.from(pseudoRandomBlock(n, 1, seed));

/** Y = W X̄ with X̄ᵀ given as rows (n×d): returns n×dout. */
function outputs(w: Float32Array, dout: number, rows: Float64Array, n: number, d: number): Float64Array {
  const y = new Float64Array(n * dout);
  for (let r = 0; r < n; r++)
    for (let o = 0; o < dout; o++) {
      let s = 0;
      for (let i = 0; i < d; i++) s += w[o * d + i] * rows[r * d + i];
      y[r * dout + o] = s;
    }
  return y;
}

function relDiff(a: Float64Array, b: Float64Array): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / den);
}

describe('FRESCO subspace math', () => {
  it('Householder QR returns orthonormal columns spanning the input', () => {
    const d = 20,
      k = 6;
    const a = pseudoRandomBlock(d, k, 7);
    const q = householderQ(a, d, k);
    const qtq = mulAtB(q, q, d, k, k);
    for (let i = 0; i < k; i++)
      for (let j = 0; j < k; j++) assert.ok(Math.abs(qtq[i * k + j] - (i === j ? 1 : 0)) < 1e-12);
    const qta = mulAtB(q, a, d, k, k);
    const back = mulAB(q, qta, d, k, k);
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(back[i] - a[i]) < 1e-12, 'A is not in span(Q)');
  });

  it('orthonormalSpan keeps only independent columns: the numerical rank, orthonormal, spanning the input', () => {
    const d = 12;
    const a1 = pseudoRandomBlock(d, 1, 21),
      a2 = pseudoRandomBlock(d, 1, 22);
    const cols = [a1, a2, a1.map((v, i) => v + 2 * a2[i]), a1]; // rank 2
    const a = new Float64Array(d * 4);
    cols.forEach((c, j) => c.forEach((v, i) => (a[i * 4 + j] = v)));
    const q = orthonormalSpan(a, d, 4);
    assert.equal(q.k, 2);
    const qtq = mulAtB(q.data, q.data, d, 2, 2);
    for (let i = 0; i < 2; i++)
      for (let j = 0; j < 2; j++) assert.ok(Math.abs(qtq[i * 2 + j] - (i === j ? 1 : 0)) < 1e-12);
    const back = mulAB(q.data, mulAtB(q.data, a, d, 2, 4), d, 2, 4);
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(back[i] - a[i]) < 1e-12, 'A is not in span(Q)');
    assert.equal(orthonormalSpan(new Float64Array(d * 3), d, 3).k, 0);
  });

  it('merging the bases of identical microbatches protects their span once: the minimum-norm projection of eq. (7)', () => {
    const n = 2,
      din = 7,
      dout = 5;
    const xb = augment(rand(n * din, 31), n, din);
    const b = extractBasis(xb, 2);
    const q = mergeBases([b, b, b], 6);
    assert.equal(q.k, 2, 'three copies of a rank-2 input are rank 2');
    const delta = rand(dout * xb.d, 32);
    const exact = Float64Array.from(delta);
    project(exact, dout, { ...orthonormalSpan(transpose(xb.rows, n, xb.d), xb.d, n), d: xb.d });
    const got = Float64Array.from(delta);
    project(got, dout, q);
    assert.ok(relDiff(got, exact) < 1e-9, `Δ' differs from Δ(I − P_col X̄) by ${relDiff(got, exact)}`);
  });

  it('merging keeps the dominant directions of the concatenated bases when they stand out', () => {
    const d = 65,
      k = 16;
    const bases = [0, 1, 2, 3].map((mb) => {
      const x = rand(32 * 64, 900 + mb);
      for (let r = 0; r < 32; r++) for (let i = 0; i < 64; i++) x[r * 64 + i] *= 0.3 ** (i / 4);
      return extractBasis(augment(x, 32, 64), 8);
    });
    const m = bases.reduce((acc, b) => acc + b.k, 0);
    const ct = new Float64Array(m * d); // Cᵀ: one basis column per row
    let off = 0;
    for (const b of bases) {
      for (let j = 0; j < b.k; j++) for (let i = 0; i < d; i++) ct[(off + j) * d + i] = b.data[i * b.k + j];
      off += b.k;
    }
    const top = exactTopK({ rows: ct, n: m, d }, k);
    const sv = singularValues({ rows: ct, n: m, d });
    assert.ok(sv[k - 1] / sv[k] > 1.5, `a spectral gap at k (${sv[k - 1] / sv[k]})`);
    const q = mergeBases(bases, k);
    const overlap = frobenius(mulAtB(top.data, q.data, d, k, q.k)) ** 2 / k;
    assert.ok(overlap > 0.999, `overlap with the exact top-${k} subspace ${overlap}`);
  });

  it('exact top-k vectors are eigenvectors of X̄X̄ᵀ with eigenvalues σ²', () => {
    const n = 12,
      din = 9;
    const xb = augment(rand(n * din, 3), n, din);
    const u = exactTopK(xb, 3);
    const s = singularValues(xb);
    const g = mulAtB(xb.rows, xb.rows, n, xb.d, xb.d);
    const gu = mulAB(g, u.data, xb.d, xb.d, 3);
    for (let j = 0; j < 3; j++)
      for (let i = 0; i < xb.d; i++) {
        assert.ok(Math.abs(gu[i * 3 + j] - s[j] ** 2 * u.data[i * 3 + j]) < 1e-9 * s[0] ** 2);
      }
    for (let j = 1; j < s.length; j++) assert.ok(s[j] <= s[j - 1]);
  });

  it('keeps in-flight outputs W X̄ unchanged under full protection, with microbatches leaving out of order', () => {
    const [din, dout, n, tau] = [48, 40, 6, 4];
    const d = din + 1;
    const f = new Fresco({ tau, alpha: 1 }); // k = min(τn, 40) = 24 = rank of 4 in-flight X̄
    f.addLayer('fc', dout, din);
    const w = rand(dout * d, 11);
    const inflight = new Map<number, { rows: Float64Array; y0: Float64Array }>();
    let worst = 0,
      updates = 0,
      nextMb = 0,
      seed = 100;
    const check = () => {
      for (const [, m] of inflight) worst = Math.max(worst, relDiff(outputs(w, dout, m.rows, n, d), m.y0));
    };
    const enter = () => {
      const mb = nextMb++;
      const x = rand(n * din, seed++);
      f.onForward('fc', mb, x, n);
      const rows = augment(x, n, din).rows;
      inflight.set(mb, { rows, y0: outputs(w, dout, rows, n, d) });
    };
    const update = () => {
      const delta = rand(dout * d, seed++);
      for (let i = 0; i < delta.length; i++) delta[i] *= 0.1;
      const before = frobenius(delta);
      f.projectUpdate('fc', delta);
      assert.ok(frobenius(delta) <= before * (1 + 1e-6));
      for (let i = 0; i < w.length; i++) w[i] += delta[i];
      updates++;
      check();
    };
    const leave = (mb: number) => {
      f.onBackward('fc', mb);
      inflight.delete(mb);
      update();
    };
    for (let i = 0; i < 4; i++) {
      enter();
      update();
    }
    leave(2);
    enter();
    leave(0);
    update();
    enter();
    leave(5);
    leave(1);
    update();
    update();
    enter();
    enter();
    leave(3);
    leave(7);
    update();
    leave(4);
    leave(6);
    assert.ok(updates >= 14);
    assert.deepEqual(f.inFlight('fc'), []);
    assert.ok(worst < 1e-5, `relative change of an in-flight output: ${worst}`);
  });

  it('bounds the relaxed residual by σ_{k+1}(X̄)·‖Δ‖ with the exact top-k basis', () => {
    const n = 40,
      din = 32,
      dout = 16,
      k = 8;
    const xb = augment(rand(n * din, 21), n, din);
    const q = exactTopK(xb, k);
    const sigma = singularValues(xb)[k];
    for (let t = 0; t < 5; t++) {
      const delta = rand(dout * xb.d, 300 + t);
      const norm = frobenius(delta);
      project(delta, dout, q);
      const resid = frobenius(mulAB(delta, transpose(xb.rows, n, xb.d), dout, xb.d, n)); // ‖Δ'X̄‖_F
      assert.ok(resid <= sigma * norm * (1 + 1e-6), `‖Δ'X̄‖ = ${resid} > σ_{k+1}‖Δ‖ = ${sigma * norm}`);
    }
  });

  it('measures the cheap power-iteration basis against the σ_{k+1} bound', () => {
    const [din, dout, n, tau] = [64, 64, 32, 4];
    const d = din + 1;
    const f = new Fresco({ tau, alpha: 0.25 }); // k = ⌈0.25·64⌉ = 16, k1 = 4
    f.addLayer('fc', dout, din);
    const all = new Float64Array(tau * n * d);
    for (let mb = 0; mb < tau; mb++) {
      // Inputs with a decaying spectrum, like real activations.
      const x = rand(n * din, 500 + mb);
      for (let r = 0; r < n; r++) for (let i = 0; i < din; i++) x[r * din + i] *= 1 / (1 + i);
      f.onForward('fc', mb, x, n);
      all.set(augment(x, n, din).rows, mb * n * d);
    }
    const k = f.protectedRank('fc', n);
    const q = f.buildProtectedBasis('fc')!;
    assert.equal(q.k, k);
    const sigma = singularValues({ rows: all, n: tau * n, d })[k];
    const xt = transpose(all, tau * n, d);
    let worst = 0,
      vsNone = 0;
    for (let t = 0; t < 5; t++) {
      const delta = rand(dout * d, 700 + t);
      const raw = frobenius(mulAB(delta, xt, dout, d, tau * n));
      const norm = frobenius(delta);
      project(delta, dout, q);
      assert.ok(frobenius(delta) <= norm * (1 + 1e-6), 'projection increased ‖Δ‖');
      const resid = frobenius(mulAB(delta, xt, dout, d, tau * n));
      worst = Math.max(worst, resid / (sigma * norm));
      vsNone = Math.max(vsNone, resid / raw);
    }
    console.log(
      `      power-iteration basis: ‖Δ'X̄‖ / (σ_{k+1}‖Δ‖) ≤ ${worst.toFixed(3)}; ‖Δ'X̄‖ / ‖ΔX̄‖ ≤ ${vsNone.toFixed(3)} (k=${k}, τ=${tau}, n=${n}, d=${d})`,
    );
    // Exact top-k directions give at most 1; a basis that missed the dominant directions gives more (a random one: about 4 here).
    assert.ok(worst <= 1, `‖Δ'X̄‖ = ${worst.toFixed(3)}·σ_{k+1}‖Δ‖: the basis misses dominant directions`);
    assert.ok(vsNone < 1);
  });

  it('gives bitwise the same basis for the same inputs', () => {
    const xb = augment(rand(30 * 20, 9), 30, 20);
    const a = extractBasis(xb, 5),
      b = extractBasis(xb, 5);
    assert.deepEqual([...a.data], [...b.data]);
    const qa = mergeBases([a, extractBasis(augment(rand(600, 10), 30, 20), 5)], 6);
    const qb = mergeBases([b, extractBasis(augment(rand(600, 10), 30, 20), 5)], 6);
    assert.deepEqual([...qa.data], [...qb.data]);
  });

  it('keys bases by microbatch and reports the bytes it holds', () => {
    const f = new Fresco({ tau: 2, alpha: 0.5 });
    f.addLayer('fc', 8, 7); // d = 8, k = min(2n, 4) = 4, k1 = 2
    for (const mb of [3, 1, 2]) f.onForward('fc', mb, rand(5 * 7, mb), 5);
    assert.equal(f.extraStateBytes(), 3 * 8 * 2 * 4);
    f.onBackward('fc', 1);
    assert.deepEqual(f.inFlight('fc'), [3, 2]);
    assert.throws(
      () => f.onBackward('fc', 1),
      (e: Error) => e instanceof FrescoError && /mb 1/.test(e.message) && /\[3, 2\]/.test(e.message),
    );
    assert.throws(() => f.onForward('fc', 3, rand(35, 1), 5), /already in flight/);
  });

  it('projects a tfjs-layout kernel and bias exactly as the augmented matrix, and leaves other params alone', () => {
    const din = 6,
      dout = 5,
      n = 3,
      d = din + 1;
    const pol = new FrescoPolicy({
      tau: 2,
      alpha: 1,
      layers: [{ layer: 'fc', weight: 'k', bias: 'b', layout: 'in-out', dout, din }],
    });
    const ref = new Fresco({ tau: 2, alpha: 1 });
    ref.addLayer('fc', dout, din);
    const x = rand(n * din, 40);
    pol.forward(0, new Map([['fc', { x, n }]]));
    ref.onForward('fc', 0, x, n);
    const full = rand(dout * d, 41);
    const kernel = new Float32Array(din * dout),
      bias = new Float32Array(dout);
    for (let o = 0; o < dout; o++) {
      for (let i = 0; i < din; i++) kernel[i * dout + o] = full[o * d + i];
      bias[o] = full[o * d + din];
    }
    const emb = rand(4, 42),
      embCopy = emb.slice();
    pol.transformUpdate(
      new Map([
        ['k', kernel],
        ['b', bias],
        ['emb', emb],
      ]),
      { params: new Map(), step: 1, lr: 1 },
    );
    ref.projectUpdate('fc', full);
    for (let o = 0; o < dout; o++) {
      for (let i = 0; i < din; i++) assert.equal(kernel[i * dout + o], full[o * d + i]);
      assert.equal(bias[o], full[o * d + din]);
    }
    assert.deepEqual([...emb], [...embCopy]);
  });

  it('hands each backward the unprojected parameters its forward saw, counts them, and frees them when the last microbatch that saw them is done', () => {
    const din = 3,
      dout = 2,
      n = 2;
    const pol = new FrescoPolicy({
      tau: 2,
      alpha: 1,
      layers: [{ layer: 'fc', weight: 'k', bias: 'b', layout: 'in-out', dout, din }],
    });
    const params = new Map([
      ['k', new Float32Array(din * dout).fill(1)],
      ['b', new Float32Array(dout)],
      ['g', Float32Array.from([1, 2, 3, 4])],
    ]);
    const ctx = (step: number) => ({ params, step, lr: 1 });
    const update = (step: number) => {
      const delta = new Map([...params].map(([name, p]) => [name, new Float32Array(p.length).fill(0.5)]));
      pol.transformUpdate(delta, ctx(step));
      for (const [name, p] of params) p.forEach((_, i) => (p[i] += delta.get(name)![i]));
    };
    pol.forward(0, new Map([['fc', { x: rand(n * din, 90), n }]]));
    pol.forward(1, new Map([['fc', { x: rand(n * din, 91), n }]]));
    assert.equal(pol.versionsHeld, 0, 'nothing is copied before an update');
    update(1); // both saw version 0: one copy of g
    assert.equal(pol.versionsHeld, 1);
    assert.equal(pol.extraStateBytes(), pol.fresco.extraStateBytes() + 4 * 4, 'the copy of g is counted');
    pol.forward(2, new Map([['fc', { x: rand(n * din, 92), n }]]));
    update(2); // mb 2 saw version 1: a second copy
    assert.equal(pol.versionsHeld, 2);
    assert.equal(pol.extraStateBytes(), pol.fresco.extraStateBytes() + 2 * 4 * 4);
    for (const mb of [0, 1]) {
      const w = pol.weightsForBackward(mb, ctx(2));
      assert.deepEqual([...w.get('g')!], [1, 2, 3, 4], `mb ${mb} gets g as its forward saw it`);
      assert.equal(w.get('k'), params.get('k'), 'and the current, projected linear weights');
    }
    assert.deepEqual([...pol.weightsForBackward(2, ctx(2)).get('g')!], [1.5, 2.5, 3.5, 4.5]);
    pol.backward(1);
    assert.equal(pol.versionsHeld, 2, 'mb 0 still needs version 0');
    pol.backward(0);
    assert.equal(pol.versionsHeld, 1);
    pol.backward(2);
    assert.equal(pol.versionsHeld, 0);
    assert.deepEqual(pol.fresco.inFlight('fc'), []);
    assert.equal(pol.extraStateBytes(), pol.fresco.extraStateBytes(), 'no copies counted once none is held');
  });

  for (const layout of ['augmented', 'out-in', 'in-out'] as const) {
    for (const bias of [true, false]) {
      it(`projects ${bias ? 'a biased' : 'a bias-free'} ${layout} update in place as Δ̄(I − QQᵀ) with the full projector`, () => {
        const din = 13,
          dout = 37,
          n = 5,
          tau = 3,
          d = bias ? din + 1 : din; // dout spans partial blocks
        const f = new Fresco({ tau, alpha: 0.5 }); // k = min(15, ⌈0.5·min(37, d)⌉) = 7
        f.addLayer('fc', dout, din, bias);
        for (let mb = 0; mb < tau; mb++) f.onForward('fc', mb, rand(n * din, 60 + mb), n);
        const q = f.buildProtectedBasis('fc')!;
        assert.equal(q.k, 7);
        const full = rand(dout * d, 70); // Δ̄, dout×d
        const proj = new Float64Array(d * d); // I − QQᵀ
        for (let i = 0; i < d; i++)
          for (let j = 0; j < d; j++) {
            let s = 0;
            for (let c = 0; c < q.k; c++) s += q.data[i * q.k + c] * q.data[j * q.k + c];
            proj[i * d + j] = (i === j ? 1 : 0) - s;
          }
        const ref = mulAB(full, proj, dout, d, d);
        const { weight, bias: b } = split(full, layout, dout, din, bias);
        assert.equal(f.projectLayerUpdate('fc', layout, weight, b), true);
        const got = join(weight, b, layout, dout, din, bias);
        let scale = 0,
          diff = 0,
          moved = 0;
        for (let i = 0; i < ref.length; i++) {
          scale = Math.max(scale, Math.abs(full[i]));
          diff = Math.max(diff, Math.abs(got[i] - ref[i]));
          moved = Math.max(moved, Math.abs(ref[i] - full[i]));
        }
        assert.ok(moved > 0.05 * scale, `the projection barely changes Δ̄ (${moved}), the comparison would be vacuous`);
        assert.ok(diff <= 1e-6 * scale, `max |Δ' − Δ̄(I − QQᵀ)| = ${diff}, max |Δ̄| = ${scale}`);
        const gathered = full.slice();
        project(gathered, dout, q);
        assert.deepEqual([...got], [...gathered], 'in-place result differs bitwise from project() on the gathered Δ̄');
      });
    }
  }

  it('rejects an update whose bias does not match the layer, naming the layer', () => {
    const f = new Fresco({ tau: 1 });
    f.addLayer('fc', 4, 3, false);
    f.onForward('fc', 0, rand(6, 1), 2);
    assert.throws(
      () => f.projectLayerUpdate('fc', 'in-out', rand(12, 2), rand(4, 3)),
      (e: Error) => e instanceof FrescoError && /"fc"/.test(e.message) && /without a bias/.test(e.message),
    );
    assert.throws(() => f.projectLayerUpdate('fc', 'out-in', rand(11, 2)), /11 elements, expected 4×3/);
    assert.throws(
      () => projectInPlace('in-out', rand(12, 2), undefined, 4, f.buildProtectedBasis('fc')!, new Float64Array(1)),
      /scratch has 1 elements/,
    );
  });

  it('holds only the in-flight bases and a block scratch: far less than the weights of a 256→1024 layer', () => {
    const din = 256,
      dout = 1024,
      tau = 8,
      n = 32,
      alpha = 0.25,
      d = din + 1;
    const pol = new FrescoPolicy({
      tau,
      alpha,
      layers: [{ layer: 'fc1', weight: 'k', bias: 'b', layout: 'in-out', dout, din }],
    });
    const k = Math.min(tau * n, Math.ceil(alpha * Math.min(dout, d))); // 65
    const k1 = Math.ceil(k / tau); // 9
    const basesBytes = tau * d * k1 * 4;
    const scratchBytes = Math.min(PROJECTION_BLOCK_ROWS, dout) * k * 8;
    for (let mb = 0; mb < tau; mb++) pol.forward(mb, new Map([['fc1', { x: rand(n * din, 80 + mb), n }]]));
    assert.equal(pol.extraStateBytes(), basesBytes);
    const kernel = rand(din * dout, 90),
      bias = rand(dout, 91),
      before = kernel.slice();
    pol.transformUpdate(
      new Map([
        ['k', kernel],
        ['b', bias],
      ]),
      { params: new Map(), step: 1, lr: 1 },
    );
    assert.ok(
      kernel.some((v, i) => v !== before[i]),
      'the update was not projected',
    );
    const weightBytes = dout * d * 4;
    assert.equal(pol.extraStateBytes(), basesBytes + scratchBytes);
    assert.ok(
      pol.extraStateBytes() <= weightBytes / 8,
      `${pol.extraStateBytes()} B of extra state vs ${weightBytes} B of weights`,
    );
    for (let mb = 0; mb < tau; mb++) pol.backward(mb);
    assert.equal(pol.extraStateBytes(), scratchBytes);
  });

  it('times buildProtectedBasis + project at d=257, dout=256, k=64, τ=8, n=64', function () {
    this.timeout(20000);
    const din = 256,
      dout = 256,
      n = 64,
      tau = 8;
    const f = new Fresco({ tau }); // k = ⌈0.25·256⌉ = 64, k1 = 8
    f.addLayer('fc', dout, din);
    let t0 = performance.now();
    for (let mb = 0; mb < tau; mb++) f.onForward('fc', mb, rand(n * din, 900 + mb), n);
    const extractMs = (performance.now() - t0) / tau;
    const delta = rand(dout * (din + 1), 999);
    const reps = 5;
    let buildMs = 0,
      projMs = 0;
    for (let r = 0; r < reps; r++) {
      t0 = performance.now();
      const q = f.buildProtectedBasis('fc')!;
      const t1 = performance.now();
      project(delta, dout, q);
      projMs += performance.now() - t1;
      buildMs += t1 - t0;
    }
    // The relaxed path (fewer directions than candidates: power iteration + QR).
    t0 = performance.now();
    const q48 = f.buildProtectedBasis('fc', 48)!;
    const relaxedMs = performance.now() - t0;
    assert.equal(q48.k, 48);
    // In place on a tfjs kernel (din×dout) and bias, as the parameter store does.
    const q = f.buildProtectedBasis('fc')!;
    const { weight, bias } = split(delta, 'in-out', dout, din, true);
    const scratch = new Float64Array(PROJECTION_BLOCK_ROWS * q.k);
    let inOutMs = 0;
    for (let r = 0; r < reps; r++) {
      t0 = performance.now();
      projectInPlace('in-out', weight, bias, dout, q, scratch);
      inOutMs += performance.now() - t0;
    }
    console.log(
      `      extractBasis ${extractMs.toFixed(1)} ms/mb; buildProtectedBasis ${(buildMs / reps).toFixed(1)} ms + project ${(projMs / reps).toFixed(1)} ms (k=64 from 64 candidates); in place on an in-out kernel ${(inOutMs / reps).toFixed(1)} ms; relaxed k=48 build ${relaxedMs.toFixed(1)} ms`,
    );
    assert.ok(buildMs / reps + projMs / reps < 2000 && inOutMs / reps < 2000);
  });
});

/** Δ̄ (dout×d) laid out as the layer's own tensors. */
function split(
  full: Float32Array,
  layout: WeightLayout,
  dout: number,
  din: number,
  bias: boolean,
): { weight: Float32Array; bias?: Float32Array } {
  const d = bias ? din + 1 : din;
  if (layout === 'augmented') return { weight: full.slice() };
  const weight = new Float32Array(dout * din);
  const b = bias ? new Float32Array(dout) : undefined;
  for (let o = 0; o < dout; o++) {
    for (let i = 0; i < din; i++) weight[layout === 'out-in' ? o * din + i : i * dout + o] = full[o * d + i];
    if (b) b[o] = full[o * d + din];
  }
  return { weight, bias: b };
}

function join(
  weight: Float32Array,
  b: Float32Array | undefined,
  layout: WeightLayout,
  dout: number,
  din: number,
  bias: boolean,
): Float32Array {
  if (layout === 'augmented') return weight;
  const d = bias ? din + 1 : din;
  const full = new Float32Array(dout * d);
  for (let o = 0; o < dout; o++) {
    for (let i = 0; i < din; i++) full[o * d + i] = weight[layout === 'out-in' ? o * din + i : i * dout + o];
    if (b) full[o * d + din] = b[o];
  }
  return full;
}

function transpose(a: Float64Array, rows: number, cols: number): Float64Array {
  const t = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = a[r * cols + c];
  return t;
}
