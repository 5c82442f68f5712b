import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import { VirtualClock } from '../base/clock';
import { resolveConfig } from '../job/config';
import { runJob, summarize } from '../job/run-local';
import { ConsistencyName, PAPER_METHODS, StoreMsg, StoreStats, spawnParamStore } from '../actors/param-store';
import { AsyncSettings } from '../actors/param-store-policy';
import { ASYNC_DEFAULTS } from '../job/defaults';
import { ActorRuntime } from '../actors/runtime';
import { asyncStageModule, initialParams } from '../compute/async-training';
import { loadBackend } from '../models/backend';
import { CapturedLinearInput, captureLinearInputs } from '../models/layers';
import { TrainConfig } from '../models/train-config';
import { TRAIN_DEFAULTS } from '../job/defaults';
import { train } from '../cli/train';

const asyncSim = (P: number, M: number, policy: string, extra = {}) =>
  runJob(resolveConfig({ stages: P, microbatches: M, policy, mode: 'async', profile: 'uniform', ...extra }), {
    clock: 'virtual',
  });

describe('asynchronous pipelines', function () {
  this.timeout(300_000);

  it('has staleness P-1-s at stage s under binding 1f1b on uniform durations (min(j, P-1-s) for microbatch j)', async () => {
    for (const P of [2, 4, 8]) {
      const r = await asyncSim(P, 24, '1f1b');
      for (let s = 0; s < P; s++) {
        const st = r.records[0].reports[s].store as StoreStats;
        assert.equal(st.updates, 24);
        assert.equal(st.staleness.max, P - 1 - s, `P=${P} stage ${s}`);
        assert.deepEqual(
          st.stalenessByUpdate,
          Array.from({ length: 24 }, (_, j) => Math.min(j, P - 1 - s)),
          `P=${P} stage ${s}`,
        );
      }
    }
  });

  it("reports the staleness of a run longer than a call's argument limit (150,000 updates at one stage)", async () => {
    const runtime = new ActorRuntime(new VirtualClock());
    const store = spawnParamStore({
      runtime,
      stage: 0,
      inflightBound: 2,
      settings: ASYNC_DEFAULTS,
      params: null,
      infos: [],
    });
    const n = 150_000;
    for (let mb = 0; mb < n; mb++) {
      runtime.send(store, { type: 'forward-ran', mb });
      if (mb > 0) runtime.send(store, { type: 'backward-ran', mb: mb - 1 });
    }
    runtime.send(store, { type: 'backward-ran', mb: n - 1 });
    const st = await runtime
      .ask<StoreMsg, StoreStats>(store, (reply) => ({ type: 'stats', reply }), 10_000)
      .catch((e: Error) => {
        throw new Error(`${e.message}; failures: ${runtime.failures.map((f) => f.error.message).join('; ')}`);
      });
    runtime.shutdown();
    assert.deepEqual(runtime.failures, []);
    assert.deepEqual([st.updates, st.staleness.count, st.staleness.max, st.stalenessByUpdate.length], [n, n, 1, n]);
  });

  it('runs readiness-first bf without a flush: out-of-order completion, every microbatch updates every stage once', async () => {
    const r = await asyncSim(4, 32, 'bf', { jitter: 'paper', seed: 3, bufferLimit: 4, profile: 'llm' });
    const s = summarize(r);
    assert.deepEqual(s.updates, [32, 32, 32, 32]);
    assert.equal(s.tasks, 4 * 32 * 2);
    const order = r.events
      .filter((e) => e.type === 'task-end' && e.stage === 0 && e.kind === 'B')
      .map((e) => (e.type === 'task-end' ? e.mb : -1));
    assert.notDeepEqual(
      order,
      [...order].sort((a, b) => a - b),
      'microbatches completed out of order at stage 0',
    );
  });

  it('keeps P - s in flight at stage s by default (buffer limit depth), and the stores cover exactly that', async () => {
    for (const [extra, bound] of [
      [{}, [4, 3, 2, 1]],
      [{ bufferLimit: 6 }, [6, 6, 6, 6]],
    ] as const) {
      const cfg = resolveConfig({
        stages: 4,
        microbatches: 32,
        policy: 'bf',
        mode: 'async',
        profile: 'llm',
        jitter: 'paper',
        seed: 5,
        ...extra,
      });
      assert.equal(cfg.bufferLimit, 'bufferLimit' in extra ? 6 : 'depth');
      const r = await runJob(cfg, { clock: 'virtual' });
      const s = summarize(r);
      assert.deepEqual(s.inflight_bound, bound);
      assert.deepEqual(s.delay, [3, 2, 1, 0], 'the nominal delay P - 1 - s, which both limits allow');
      s.peak_inflight.forEach((p: number, st: number) =>
        assert.ok(p <= bound[st], `stage ${st}: ${p} in flight over the bound ${bound[st]}`),
      );
    }
  });

  it('refuses split backward and interleaving in asynchronous mode, clearly', async () => {
    await assert.rejects(asyncSim(4, 8, 'bfw'), /splits backward/);
    await assert.rejects(
      runJob(resolveConfig({ stages: 2, chunks: 2, microbatches: 4, policy: 'bf', mode: 'async' }), {
        clock: 'virtual',
      }),
      /one chunk per stage/,
    );
  });

  describe('parameter store with real weights', () => {
    before(async () => {
      await loadBackend({ force: 'wasm' });
    });
    const t: TrainConfig = {
      ...TRAIN_DEFAULTS,
      model: 'mlp',
      microbatchSize: 4,
      seq: 8,
      layers: 2,
      width: 16,
      totalIterations: 1,
    };
    const shape = { stages: 2, chunks: 1, microbatches: 4, splitBackward: false };

    /** Stage 0 of a two-stage async MLP (of `cfg`) and its parameter store, on a virtual clock. */
    function storeOfOneStage(cfg: TrainConfig, inflightBound: number, settings: AsyncSettings) {
      const runtime = new ActorRuntime(new VirtualClock());
      const module = asyncStageModule(1, shape, cfg);
      const init = initialParams(module);
      const store = spawnParamStore({
        runtime,
        stage: 0,
        inflightBound,
        settings,
        params: init.params,
        infos: init.infos,
      });
      return { runtime, module, init, store };
    }

    async function scenario(consistency: ConsistencyName) {
      const { runtime, module, init, store } = storeOfOneStage(t, 2, {
        ...ASYNC_DEFAULTS,
        consistency,
        lr: 0.05,
        warmup: 0,
      });
      const ask = <R>(make: (reply: (r: R) => void) => StoreMsg) => runtime.ask<StoreMsg, R>(store, make);
      const copy = (w: ReadonlyMap<string, Float32Array> | null) =>
        new Map([...w!].map(([n, p]) => [n, Float32Array.from(p)]));
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
      const result = {
        atForward,
        atBackward,
        current,
        gradAtBackward: grad(atBackward),
        gradAtForward: grad(atForward),
      };
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

    /**
     * Four microbatches in flight at stage 0 of 2 (P - s = 2: the store covers its
     * in-flight bound, not the pipeline depth); the backwards of 3 and 2 update every
     * parameter, the norms' too. Returns how far each protected layer's output and the
     * stage's output, recomputed with the weights the store hands the backward, moved
     * for microbatches 0 and 1 (still in flight), relative to their forward.
     */
    async function inFlightDrift(consistency: ConsistencyName, backward: 'kept' | 'recompute' = 'recompute') {
      // n = 2 rows each, width 16: 3 x 2 = 6 directions fit every layer, so alpha = 1 protects them exactly.
      const small: TrainConfig = { ...t, microbatchSize: 2 };
      const { runtime, module, init, store } = storeOfOneStage(small, 4, {
        ...ASYNC_DEFAULTS,
        consistency,
        alpha: 1,
        lr: 0.05,
        warmup: 0,
        backward,
      });
      const before = new Map([...init.params].map(([n, p]) => [n, Float32Array.from(p)]));
      const ask = <R>(make: (reply: (r: R) => void) => StoreMsg) => runtime.ask<StoreMsg, R>(store, make);
      const names = module.paramNames();
      const forward = (w: ReadonlyMap<string, Float32Array>, x: tf.Tensor) => {
        const ts = names.map((n, i) => tf.tensor(w.get(n)!, module.params()[i].shape));
        const { result, inputs } = captureLinearInputs(new Map(ts.map((tensor, i) => [tensor.id, names[i]])), () =>
          module.forward(x, ts),
        );
        const y = Float64Array.from(result.dataSync());
        tf.dispose([result, ...ts]);
        return { y, inputs };
      };
      const xs: tf.Tensor[] = [];
      const captured: CapturedLinearInput[][] = [];
      const outputs: Float64Array[] = [];
      for (let mb = 0; mb < 4; mb++) {
        const w = await ask<ReadonlyMap<string, Float32Array> | null>((reply) => ({
          type: 'weights',
          purpose: 'forward',
          mb,
          reply,
        }));
        xs.push(tf.randomNormal([2, 16], 0, 1, 'float32', 11 + mb));
        const { y, inputs } = forward(w!, xs[mb]);
        captured.push(inputs);
        outputs.push(y);
        runtime.send(store, { type: 'forward-ran', mb, inputs });
      }
      assert.ok(captured[0].length >= 2, 'the stage has linear layers to protect');
      assert.ok(names.length > 2 * captured[0].length, 'the stage has parameters FRESCO does not project (norms)');
      for (const mb of [3, 2]) {
        const grads = new Map(
          [...init.params].map(([n, p]) => [n, p.map((_, i) => Math.sin(i * (mb + 1) + n.length))]),
        );
        runtime.send(store, { type: 'backward-ran', mb, grads });
      }
      const after = await ask<Map<string, Float32Array>>((reply) => ({ type: 'params', reply }));
      const layerOutput = (c: CapturedLinearInput, p: ReadonlyMap<string, Float32Array>) => {
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
      const rel = (a: ArrayLike<number>, b: ArrayLike<number>) => norm(Array.from(a, (v, i) => v - b[i])) / norm(b);
      let moved = 0;
      for (const n of names) moved = Math.max(moved, rel(after.get(n)!, before.get(n)!));
      const layers: number[] = [];
      const stage: number[] = [];
      for (const mb of [0, 1]) {
        for (const c of captured[mb]) layers.push(rel(layerOutput(c, after), layerOutput(c, before)));
        const w = await ask<ReadonlyMap<string, Float32Array> | null>((reply) => ({
          type: 'weights',
          purpose: 'backward',
          mb,
          reply,
        }));
        stage.push(rel(forward(w!, xs[mb]).y, outputs[mb]));
      }
      const stats = await ask<StoreStats>((reply) => ({ type: 'stats', reply }));
      tf.dispose(xs);
      module.dispose();
      runtime.shutdown();
      return { moved, layers: Math.max(...layers), stage: Math.max(...stage), extra: stats.extraStateBytes };
    }

    it('fresco at full budget, backward recompute: the backward of every in-flight microbatch recomputes the outputs its forward gave, norms updated and all', async () => {
      const r = await inFlightDrift('fresco', 'recompute');
      assert.ok(r.moved > 1e-3, `the parameters moved (${r.moved})`);
      assert.ok(
        r.layers < 1e-4,
        `a protected layer's output moved by ${r.layers.toExponential(2)} on the forward-time inputs`,
      );
      assert.ok(r.stage < 1e-4, `the stage output recomputed at the backward moved by ${r.stage.toExponential(2)}`);
    });

    it('fresco at full budget, kept activations: every protected layer gives the in-flight inputs their forward outputs, and nothing but the bases is held', async () => {
      const kept = await inFlightDrift('fresco', 'kept');
      const recompute = await inFlightDrift('fresco', 'recompute');
      assert.ok(kept.moved > 1e-3, `the parameters moved (${kept.moved})`);
      assert.ok(
        kept.layers < 1e-4,
        `a protected layer's output moved by ${kept.layers.toExponential(2)} on the forward-time inputs`,
      );
      assert.ok(
        kept.extra < recompute.extra,
        `kept: ${kept.extra} bytes (bases only), recompute also holds the norms: ${recompute.extra}`,
      );
      assert.ok(
        kept.stage > 1e-4,
        'with the norms updated too, a recompute would see other outputs: kept activations are what make this exact',
      );
    });

    it('none: the same updates move the stage output the backward recomputes (what fresco prevents)', async () => {
      const r = await inFlightDrift('none');
      assert.ok(r.stage > 1e-2, `the stage output moved by only ${r.stage.toExponential(2)}`);
    });

    it('refuses a backward whose gradients do not match the parameters before changing anything, and carries on', async () => {
      const { runtime, module, init, store } = storeOfOneStage(t, 2, { ...ASYNC_DEFAULTS, consistency: 'stash' });
      await runtime.ask<StoreMsg, unknown>(store, (reply) => ({ type: 'weights', purpose: 'forward', mb: 0, reply }));
      runtime.send(store, { type: 'forward-ran', mb: 0 });
      const [first] = init.params.keys();
      const short = new Map([...init.params].map(([n, p]) => [n, n === first ? p.slice(1) : p.map(() => 0.1)]));
      runtime.send(store, { type: 'backward-ran', mb: 0, grads: short });
      const stats = () => runtime.ask<StoreMsg, StoreStats>(store, (reply) => ({ type: 'stats', reply }));
      assert.equal((await stats()).updates, 0);
      assert.match(
        runtime.failures.map((f) => f.error.message).join('\n'),
        new RegExp(`gradient of ${first} has \\d+ values, the parameter \\d+`),
      );
      const grads = new Map([...init.params].map(([n, p]) => [n, p.map(() => 0.1)]));
      runtime.send(store, { type: 'backward-ran', mb: 0, grads });
      const after = await stats();
      assert.deepEqual(
        [after.updates, after.staleness.count],
        [1, 1],
        'the microbatch was still in flight, and its good backward updated once',
      );
      module.dispose();
      runtime.shutdown();
    });

    it('fresco: each microbatch keeps ceil(k / (bound - 1)) directions per layer, as bound - 1 are in flight at an update', async () => {
      const bound = 4,
        alpha = 0.5;
      const { runtime, module, store } = storeOfOneStage(t, bound, { ...ASYNC_DEFAULTS, consistency: 'fresco', alpha });
      const names = module.paramNames();
      let inputs: CapturedLinearInput[] = [];
      for (let mb = 0; mb < bound; mb++) {
        const w = await runtime.ask<StoreMsg, ReadonlyMap<string, Float32Array> | null>(store, (reply) => ({
          type: 'weights',
          purpose: 'forward',
          mb,
          reply,
        }));
        const ts = names.map((n, i) => tf.tensor(w!.get(n)!, module.params()[i].shape));
        const x = tf.randomNormal([t.microbatchSize, 16], 0, 1, 'float32', 30 + mb);
        const run = captureLinearInputs(new Map(ts.map((tensor, i) => [tensor.id, names[i]])), () =>
          module.forward(x, ts),
        );
        tf.dispose([run.result, x, ...ts]);
        inputs = run.inputs;
        runtime.send(store, { type: 'forward-ran', mb, inputs });
      }
      const stats = await runtime.ask<StoreMsg, StoreStats>(store, (reply) => ({ type: 'stats', reply }));
      let expected = 0;
      for (const c of inputs) {
        const d = c.din + (c.bias ? 1 : 0);
        const k = Math.min((bound - 1) * c.n, Math.ceil(alpha * Math.min(c.dout, d)));
        expected += bound * d * Math.min(Math.ceil(k / (bound - 1)), c.n, d) * 4;
      }
      assert.equal(
        stats.extraStateBytes,
        expected,
        'the bases of the in-flight microbatches, nothing else before an update',
      );
      module.dispose();
      runtime.shutdown();
    });
  });

  it('trains with every consistency policy end to end and reports staleness and extra state', async () => {
    await loadBackend({ force: 'wasm' });
    const bytes: Record<string, number> = {};
    for (const consistency of PAPER_METHODS) {
      const t: TrainConfig = {
        ...TRAIN_DEFAULTS,
        model: 'mlp',
        microbatchSize: 8,
        seq: 8,
        layers: 4,
        width: 32,
        lr: 1e-3,
        warmup: 2,
        totalIterations: 4,
      };
      const cfg = resolveConfig({
        job: `async-${consistency}`,
        stages: 4,
        microbatches: 16,
        iterations: 1,
        policy: '1f1b',
        profile: 'uniform',
        mode: 'async',
        train: t,
        async: { ...ASYNC_DEFAULTS, consistency, lr: 1e-3, warmup: 2, totalUpdates: 16, pipemareSteps: 16 },
      });
      const r = await train(cfg, { transport: 'local', processes: 'single', clock: 'virtual' });
      assert.equal(r.losses.length, 16);
      assert.ok(r.losses.every(Number.isFinite));
      assert.equal(r.clock, 'virtual');
      assert.equal(r.tokens_per_s, null, 'no throughput from virtual seconds');
      const s = r.summary as ReturnType<typeof summarize>;
      assert.deepEqual(
        s.staleness?.map((x) => x.max),
        [3, 2, 1, 0],
      );
      bytes[consistency] = Math.max(...(s.extra_state_bytes ?? []));
      // The last stage has one in flight at most: at an update none is, so no policy keeps anything there.
      assert.equal(s.extra_state_bytes?.[3], 0, `${consistency} at the last stage`);
    }
    assert.equal(bytes.inconsistent, 0);
    assert.ok(bytes.stash > 0 && bytes.fresco > 0);
  });
});
