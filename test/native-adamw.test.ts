import * as assert from 'assert';
import * as fs from 'fs';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { ADDON_PATH, installNativeKernels, kernelSetName } from '../models/native-kernels';
import { NATIVE_ADAMW, OptimAddon, nativeAccumulate, nativeAdamW } from '../models/native-adamw';
import { stepVariables } from '../models/adamw-step';
import { AdamW, AdamWKernel } from '../policies/optim/adamw';
import { ParamInfo, applyUpdates } from '../policies/optim/params';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { SeededRandom } from '../models/seeded-init';

const built = fs.existsSync(ADDON_PATH);
const addon = (built ? require(ADDON_PATH) : null) as Partial<OptimAddon> | null;
const hasAdamW = typeof addon?.adamw === 'function';

/** Matrices decay, vectors do not; 1,001 and 7 values are odd lengths (the vector loops' tails). */
const INFOS: ParamInfo[] = [
  { name: 'w', shape: [13, 77], decay: true },
  { name: 'b', shape: [7], decay: false },
  { name: 'u', shape: [1001], decay: true },
];
const LRS = [1e-3, 3e-3, 6e-3, 6e-3, 4e-3, 2e-3];

function randoms(rng: SeededRandom, n: number, scale: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = (rng.next() * 2 - 1) * scale;
  return out;
}

/** Initial parameters and one float64 gradient sum per step and parameter (not float32 values: the rounding is part of the step). */
function problem() {
  const rng = new SeededRandom(26);
  const size = (i: ParamInfo) => i.shape.reduce((a, b) => a * b, 1);
  const params = INFOS.map((i) => Float32Array.from(randoms(rng, size(i), 1)));
  // Tiny and large gradients as well, so ε and the float32 rounding of the sums matter.
  const grads = LRS.map((_, s) => INFOS.map((i) => randoms(rng, size(i), s % 2 === 0 ? 1e-6 : 3)));
  return { params, grads };
}

const sameBits = (a: Float32Array, b: Float32Array, what: string) =>
  assert.ok(
    Buffer.compare(
      Buffer.from(a.buffer, a.byteOffset, a.byteLength),
      Buffer.from(b.buffer, b.byteOffset, b.byteLength),
    ) === 0,
    `${what} differ`,
  );

describe('native AdamW (native/optim.c)', function () {
  before(function () {
    if (!hasAdamW) this.skip(); // no addon, or one built before the optimizer kernels
  });

  it('steps bitwise as the JS optimizer, with weight decay, bias correction and odd lengths, over several steps', () => {
    const o = addon as OptimAddon;
    const { params, grads } = problem();
    const js = new AdamW(INFOS, { weightDecay: 0.1 });
    const nat = new AdamW(INFOS, { weightDecay: 0.1 });
    const pj = new Map(INFOS.map((info, i) => [info.name, params[i]!.slice()]));
    const pn = INFOS.map((_, i) => params[i]!.slice());
    LRS.forEach((lr, s) => {
      const g32 = new Map(INFOS.map((info, i) => [info.name, new Float32Array(grads[s]![i]!)]));
      applyUpdates(pj, js.propose(pj, g32, lr));
      const kernels = new Map<string, AdamWKernel>(
        INFOS.map((info, i) => [
          info.name,
          (m, v, k) =>
            o.adamw(
              pn[i]!,
              grads[s]![i]!,
              m,
              v,
              pn[i]!,
              pn[i]!.length,
              k.w1,
              k.b2,
              k.w2,
              k.eps,
              k.step,
              k.bc2Sqrt,
              k.decay,
            ),
        ]),
      );
      nat.stepWith(lr, kernels);
    });
    assert.strictEqual(nat.step, LRS.length);
    const sj = js.state();
    const sn = nat.state();
    INFOS.forEach((info, i) => {
      sameBits(pn[i]!, pj.get(info.name)!, `parameter ${info.name}`);
      sameBits(sn.m[info.name]!, sj.m[info.name]!, `first moment of ${info.name}`);
      sameBits(sn.v[info.name]!, sj.v[info.name]!, `second moment of ${info.name}`);
    });
    // The parameters moved (a step that did nothing would also agree).
    assert.ok(pn[0]!.some((x, j) => x !== params[0]![j]));
  });

  it('refuses a step without a kernel for every parameter, before any state changes', () => {
    const opt = new AdamW(INFOS);
    assert.throws(() => opt.stepWith(1e-3, new Map()), /no kernel for parameter "w"/);
    assert.throws(() => opt.stepWith(-1, new Map()), /lr must be/);
    assert.strictEqual(opt.step, 0);
  });

  it('refuses arrays shorter than n, and a float32 gradient', () => {
    const o = addon as OptimAddon;
    const f = (n: number) => new Float32Array(n);
    assert.throws(
      () => o.adamw(f(3), new Float64Array(2), f(3), f(3), f(3), 3, 0.1, 0.999, 0.001, 1e-8, 1, 1, 0),
      /shorter than n/,
    );
    assert.throws(
      () => o.adamw(f(3), f(3) as unknown as Float64Array, f(3), f(3), f(3), 3, 0.1, 0.999, 0.001, 1e-8, 1, 1, 0),
      /g must be a Float64Array/,
    );
  });

  for (const backend of ['wasm', 'cpu'] as const)
    it(`on ${backend}: stepVariables natively leaves the variables bitwise as the JS step does, and the kernel set names it`, async () => {
      await loadBackend({ force: backend });
      const { params, grads } = problem();
      const run = (native: boolean) => {
        installNativeKernels(backend, { choice: native ? 'native' : 'sgemm', threads: 1 });
        assert.strictEqual(nativeAdamW() !== null, native);
        const vars = INFOS.map((info, i) => tf.variable(tf.tensor(params[i]!, [...info.shape])));
        const opt = new AdamW(INFOS, { weightDecay: 0.1 });
        const sum = new OrderedSum(
          INFOS.map((i) => i.shape.reduce((a, b) => a * b, 1)),
          2,
          nativeAccumulate(),
        );
        LRS.forEach((lr, s) => {
          sum.reset();
          // Two microbatches, the second added first: it waits, copied, for the first.
          const halves = grads[s]!.map((g) => new Float32Array(g.map((x) => x / 2)));
          sum.add(1, halves);
          sum.add(0, halves);
          stepVariables(
            vars,
            INFOS.map((i) => i.name),
            opt,
            sum,
            lr,
          );
        });
        const out = vars.map((v) => v.dataSync().slice() as Float32Array);
        tf.dispose(vars);
        return out;
      };
      const js = run(false);
      const nat = run(true);
      INFOS.forEach((info, i) => sameBits(nat[i]!, js[i]!, `${backend} parameter ${info.name}`));
      const report = installNativeKernels(backend, { choice: 'native', threads: 1 });
      assert.ok(report.kernels.includes(NATIVE_ADAMW));
      assert.match(kernelSetName(report), /BatonAdamW/);
      installNativeKernels(backend, { choice: 'tfjs' });
      assert.strictEqual(nativeAdamW(), null);
    });
});
