import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import { VirtualClock } from '../actors/clock';
import { resolveConfig } from '../actors/config';
import { runJob, summarize } from '../actors/job';
import { ASYNC_DEFAULTS, ConsistencyName, StoreMsg, StoreStats, spawnParamStore } from '../actors/param-store';
import { ActorRuntime } from '../actors/runtime';
import { asyncStageModule, initialParams } from '../actors/async-compute';
import { loadBackend } from '../models/backend';
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
      const store = spawnParamStore({ runtime, stage: 0, stages: 2, settings: { ...ASYNC_DEFAULTS, consistency, lr: 0.05, warmup: 0 }, params: init.params, infos: init.infos });
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
      const s = r.summary as ReturnType<typeof summarize>;
      assert.deepEqual(s.staleness?.map((x) => x.max), [3, 2, 1, 0]);
      bytes[consistency] = Math.max(...(s.extra_state_bytes ?? []));
    }
    assert.equal(bytes.none, 0);
    assert.ok(bytes.stash > 0 && bytes.fresco > 0);
  });
});
