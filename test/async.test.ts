import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import { VirtualClock } from '../actors/clock';
import { resolveConfig } from '../actors/config';
import { runJob, summarize } from '../actors/job';
import { ASYNC_DEFAULTS, ConsistencyName, StoreMsg, StoreStats, spawnParamStore } from '../actors/param-store';
import { ActorRuntime } from '../actors/runtime';
import { asyncStageModule, initialParams } from '../actors/async-compute';
import { loadBackend } from '../models/backend';
import { CapturedLinearInput, captureLinearInputs } from '../models/layers';
import { TRAIN_DEFAULTS, TrainConfig } from '../models/train-config';
import { train } from '../cli/train';

const asyncSim = (P: number, M: number, policy: string, extra = {}) =>
  runJob(resolveConfig({ stages: P, microbatches: M, policy, mode: 'async', profile: 'uniform', ...extra }), { clock: 'virtual' });

describe('asynchronous pipelines', function () {
  this.timeout(300_000);

  it('has staleness P-1-s at stage s under binding 1f1b on uniform durations (min(j, P-1-s) for microbatch j)', async () => {
    for (const P of [2, 4, 8]) {
      const r = await asyncSim(P, 24, '1f1b');
      for (let s = 0; s < P; s++) {
        const st = r.records[0].reports[s].store as StoreStats;
        assert.equal(st.updates, 24);
        assert.equal(st.staleness.max, P - 1 - s, `P=${P} stage ${s}`);
        assert.deepEqual(st.stalenessByUpdate, Array.from({ length: 24 }, (_, j) => Math.min(j, P - 1 - s)), `P=${P} stage ${s}`);
      }
    }
  });

  it('runs readiness-first bf without a flush: out-of-order completion, every microbatch updates every stage once', async () => {
    const r = await asyncSim(4, 32, 'bf', { jitter: 'paper', seed: 3, bufferLimit: 4, profile: 'llm' });
    const s = summarize(r);
    assert.deepEqual(s.updates, [32, 32, 32, 32]);
    assert.equal(s.tasks, 4 * 32 * 2);
    const order = r.events.filter((e) => e.type === 'task-end' && e.stage === 0 && e.kind === 'B').map((e) => (e.type === 'task-end' ? e.mb : -1));
    assert.notDeepEqual(order, [...order].sort((a, b) => a - b), 'microbatches completed out of order at stage 0');
  });

  it('keeps P - s in flight at stage s by default (buffer limit depth), and the stores cover exactly that', async () => {
    for (const [extra, bound] of [[{}, [4, 3, 2, 1]], [{ bufferLimit: 6 }, [6, 6, 6, 6]]] as const) {
      const cfg = resolveConfig({ stages: 4, microbatches: 32, policy: 'bf', mode: 'async', profile: 'llm', jitter: 'paper', seed: 5, ...extra });
      assert.equal(cfg.bufferLimit, 'bufferLimit' in extra ? 6 : 'depth');
      const r = await runJob(cfg, { clock: 'virtual' });
      const s = summarize(r);
      assert.deepEqual(s.inflight_bound, bound);
      assert.deepEqual(s.delay, [3, 2, 1, 0], 'the nominal delay P - 1 - s, which both limits allow');
      s.peak_inflight.forEach((p: number, st: number) => assert.ok(p <= bound[st], `stage ${st}: ${p} in flight over the bound ${bound[st]}`));
    }
  });

  it('refuses split backward and interleaving in asynchronous mode, clearly', async () => {
    await assert.rejects(asyncSim(4, 8, 'bfw'), /splits backward/);
    await assert.rejects(runJob(resolveConfig({ stages: 2, chunks: 2, microbatches: 4, policy: 'bf', mode: 'async' }), { clock: 'virtual' }), /one chunk per stage/);
  });

  describe('parameter store with real weights', () => {
    before(async () => {
      await loadBackend({ force: 'wasm' });
    });
    const t: TrainConfig = { ...TRAIN_DEFAULTS, model: 'mlp', microbatchSize: 4, seq: 8, layers: 2, width: 16, totalIterations: 1 };
    const shape = { stages: 2, chunks: 1, microbatches: 4, splitBackward: false };

    async function scenario(consistency: ConsistencyName) {
      const runtime = new ActorRuntime(new VirtualClock());
      const module = asyncStageModule(1, shape, t);
      const init = initialParams(module);
      const store = spawnParamStore({ runtime, stage: 0, inflightBound: 2, settings: { ...ASYNC_DEFAULTS, consistency, lr: 0.05, warmup: 0 }, params: init.params, infos: init.infos });
      const ask = <R>(make: (reply: (r: R) => void) => StoreMsg) => runtime.ask<StoreMsg, R>(store, make);
      const copy = (w: ReadonlyMap<string, Float32Array> | null) => new Map([...w!].map(([n, p]) => [n, Float32Array.from(p)]));
      const atForward = copy(await ask((reply) => ({ type: 'weights', purpose: 'forward', mb: 0, reply })));
      runtime.send(store, { type: 'forward-ran', mb: 0 });
      await ask((reply) => ({ type: 'weights', purpose: 'forward', mb: 1, reply }));
      runtime.send(store, { type: 'forward-ran', mb: 1 });
      const grads = new Map([...init.params].map(([n, p]) => [n, p.map((_, i) => Math.sin(i + n.length))]));
      runtime.send(store, { type: 'backward-ran', mb: 1, grads });
      const atBackward = copy(await ask((reply) => ({ type: 'weights', purpose: 'backward', mb: 0, reply })));
      const current = copy(await ask((reply) => ({ type: 'params', reply })));
      // The gradient of microbatch 0 computed with the weights the store hands its backward.
      const x = tf.randomNormal([4, 16], 0, 1, 'float32', 7);
      const targets = tf.tensor([1, 2, 3, 4], [4], 'int32');
      const names = module.paramNames();
      const grad = (w: Map<string, Float32Array>) => {
        const ts = names.map((n, i) => tf.tensor(w.get(n)!, module.params()[i].shape));
        const r = module.backward(x, null, { targets, lossScale: 1, params: ts });
        const out = r.paramGrads.map((g) => Array.from(g.dataSync()));
        tf.dispose([...ts, ...r.paramGrads, ...(r.gradInput ? [r.gradInput] : [])]);
        return out;
      };
      const result = { atForward, atBackward, current, gradAtBackward: grad(atBackward), gradAtForward: grad(atForward) };
      tf.dispose([x, targets]);
      module.dispose();
      runtime.shutdown();
      return result;
    }

    it('stash: the backward gets exactly the weights its forward used, so its gradient is the forward-time gradient', async () => {
      const r = await scenario('stash');
      assert.notDeepEqual(r.current, r.atForward, 'an update happened during the flight of microbatch 0');
      assert.deepEqual(r.atBackward, r.atForward);
      assert.deepEqual(r.gradAtBackward, r.gradAtForward);
    });

    it('none: the backward gets the current weights (the inconsistency stash removes)', async () => {
      const r = await scenario('none');
      assert.deepEqual(r.atBackward, r.current);
      assert.notDeepEqual(r.gradAtBackward, r.gradAtForward);
    });

    it('fresco at full budget: updates leave the linear outputs of every in-flight microbatch unchanged, with more in flight than P - s', async () => {
      // Four microbatches in flight at stage 0 of 2 (P - s = 2): the store covers its
      // in-flight bound, not the pipeline depth. n = 2 rows each, width 16: 4 x 2 = 8
      // directions fit every layer, so alpha = 1 protects them exactly.
      const small: TrainConfig = { ...t, microbatchSize: 2 };
      const runtime = new ActorRuntime(new VirtualClock());
      const module = asyncStageModule(1, shape, small);
      const init = initialParams(module);
      const before = new Map([...init.params].map(([n, p]) => [n, Float32Array.from(p)]));
      const store = spawnParamStore({ runtime, stage: 0, inflightBound: 4, settings: { ...ASYNC_DEFAULTS, consistency: 'fresco', alpha: 1, lr: 0.05, warmup: 0 }, params: init.params, infos: init.infos });
      const ask = <R>(make: (reply: (r: R) => void) => StoreMsg) => runtime.ask<StoreMsg, R>(store, make);
      const names = module.paramNames();
      const captured: CapturedLinearInput[][] = [];
      for (let mb = 0; mb < 4; mb++) {
        const w = await ask<ReadonlyMap<string, Float32Array> | null>((reply) => ({ type: 'weights', purpose: 'forward', mb, reply }));
        const ts = names.map((n, i) => tf.tensor(w!.get(n)!, module.params()[i].shape));
        const x = tf.randomNormal([2, 16], 0, 1, 'float32', 11 + mb);
        const { result, inputs } = captureLinearInputs(new Map(ts.map((tensor, i) => [tensor.id, names[i]])), () => module.forward(x, ts));
        tf.dispose([result, x, ...ts]);
        captured.push(inputs);
        runtime.send(store, { type: 'forward-ran', mb, inputs });
      }
      assert.ok(captured[0].length >= 2, 'the stage has linear layers to protect');
      for (const mb of [3, 2]) {
        const grads = new Map([...init.params].map(([n, p]) => [n, p.map((_, i) => Math.sin(i * (mb + 1) + n.length))]));
        runtime.send(store, { type: 'backward-ran', mb, grads });
      }
      const after = await ask<Map<string, Float32Array>>((reply) => ({ type: 'params', reply }));
      const output = (c: CapturedLinearInput, p: ReadonlyMap<string, Float32Array>) => {
        const W = p.get(c.weight)!;
        const b = c.bias ? p.get(c.bias)! : null;
        const y = new Float64Array(c.n * c.dout);
        for (let r = 0; r < c.n; r++)
          for (let o = 0; o < c.dout; o++) {
            let v = b ? b[o] : 0;
            for (let i = 0; i < c.din; i++) v += c.x[r * c.din + i] * W[i * c.dout + o];
            y[r * c.dout + o] = v;
          }
        return y;
      };
      const norm = (a: ArrayLike<number>) => Math.sqrt(Array.from(a).reduce((acc, v) => acc + v * v, 0));
      let moved = 0;
      for (const c of captured[0]) moved = Math.max(moved, norm(after.get(c.weight)!.map((v, i) => v - before.get(c.weight)![i])));
      assert.ok(moved > 1e-3, `the protected weights moved (${moved})`);
      for (const mb of [0, 1]) {
        for (const c of captured[mb]) {
          const y0 = output(c, before);
          const y1 = output(c, after);
          const rel = norm(y1.map((v, i) => v - y0[i])) / norm(y0);
          assert.ok(rel < 1e-4, `microbatch ${mb}, layer ${c.weight}: output moved by ${rel.toExponential(2)}`);
        }
      }
      module.dispose();
      runtime.shutdown();
    });
  });

  it('trains with every consistency policy end to end and reports staleness and extra state', async () => {
    await loadBackend({ force: 'wasm' });
    const bytes: Record<string, number> = {};
    for (const consistency of ['none', 'stash', 'pipemare', 'predict', 'fresco'] as const) {
      const t: TrainConfig = { ...TRAIN_DEFAULTS, model: 'mlp', microbatchSize: 8, seq: 8, layers: 4, width: 32, lr: 1e-3, warmup: 2, totalIterations: 4 };
      const cfg = resolveConfig({
        job: `async-${consistency}`, stages: 4, microbatches: 16, iterations: 1, policy: '1f1b', profile: 'uniform', mode: 'async', train: t,
        async: { ...ASYNC_DEFAULTS, consistency, lr: 1e-3, warmup: 2, totalUpdates: 16, pipemareSteps: 16 },
      });
      const r = await train(cfg, { transport: 'local', processes: 'single', clock: 'virtual' });
      assert.equal(r.losses.length, 16);
      assert.ok(r.losses.every(Number.isFinite));
      assert.equal(r.clock, 'virtual');
      assert.equal(r.tokens_per_s, null, 'no throughput from virtual seconds');
      const s = r.summary as ReturnType<typeof summarize>;
      assert.deepEqual(s.staleness?.map((x) => x.max), [3, 2, 1, 0]);
      bytes[consistency] = Math.max(...(s.extra_state_bytes ?? []));
    }
    assert.equal(bytes.none, 0);
    assert.ok(bytes.stash > 0 && bytes.fresco > 0);
  });
});
