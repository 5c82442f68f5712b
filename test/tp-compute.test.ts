import { strict as assert } from 'assert';
import * as tf from '@tensorflow/tfjs';
import { loadBackend } from '../models/backend';
import { TrainConfig, corpusFor } from '../models/train-config';
import { tinyTrainConfig } from './helpers-train';
import { LocalGroup } from '../models/tp/local-all-reduce';
import { gatherRanks, shardIndex, tpModelFor } from '../models/tp/tp-layers';
import { lrAt } from '../policies/optim/schedule';
import type { AllReduce } from '../models/all-reduce';
import { hashString } from '../models/seeded-init';
import { PipelineShape, Task, task } from '../policies/task';
import { TensorPayload } from '../transport/envelope';
import { StageCompute } from '../stage/compute';
import { TpTrainingCompute } from '../compute/tp-training';
import { TrainingCompute } from '../compute/training';
import { ReplicaGroup } from '../compute/replica-reduce';

const ITERATIONS = 3;

const tiny = (model: 'gpt' | 'mlp', extra: Partial<TrainConfig> = {}): TrainConfig =>
  tinyTrainConfig(model, ITERATIONS, extra);

/** Holds each call for a keyed number of event-loop turns, so ranks reach a collective in a seed-dependent order. */
function shuffled(ar: AllReduce, seed: number, member: number): AllReduce {
  return async (key, data) => {
    const turns = hashString(`${seed}/${member}/${key}`) % 5;
    for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
    return ar(key, data);
  };
}

const runTask = (c: StageCompute, it: number, t: Task) =>
  new Promise<readonly TensorPayload[]>((resolve) => c.run(it, t, (out) => resolve(out ?? [])));

/** All ranks of a stage run `t`; every rank must send the same tensors on (rank 0's are returned). */
async function runGroup(ranks: readonly StageCompute[], it: number, t: Task): Promise<readonly TensorPayload[]> {
  const outs = await Promise.all(ranks.map((c) => runTask(c, it, t)));
  for (const o of outs.slice(1))
    assert.deepEqual(o, outs[0], `ranks of a group sent different tensors for ${t.kind}${t.mb}`);
  return outs[0]!;
}

/**
 * Drives one replica's P × T computes through `iterations` synchronous iterations: every
 * forward, then every backward (and W) in reverse microbatch order; then the flush.
 */
async function drive(
  stages: StageCompute[][],
  shape: PipelineShape,
  iterations: number,
  flush: (it: number) => Promise<unknown>,
) {
  for (let it = 0; it < iterations; it++) {
    for (let mb = 0; mb < shape.microbatches; mb++) {
      for (let s = 0; s < shape.stages; s++) {
        const out = await runGroup(stages[s]!, it, task('F', mb, 0));
        if (s + 1 < shape.stages) for (const c of stages[s + 1]!) c.accept!(it, 'input', mb, 0, out);
      }
    }
    for (let mb = shape.microbatches - 1; mb >= 0; mb--) {
      for (let s = shape.stages - 1; s >= 0; s--) {
        const out = await runGroup(stages[s]!, it, task('B', mb, 0));
        if (shape.splitBackward) await runGroup(stages[s]!, it, task('W', mb, 0));
        if (s > 0) for (const c of stages[s - 1]!) c.accept!(it, 'grad', mb, 0, out);
      }
    }
    await flush(it);
  }
}

interface TpJob {
  t: TrainConfig;
  P: number;
  T: number;
  M: number;
  D?: number;
  split?: boolean;
  seed?: number;
}

type Params = Map<string, Float32Array>;

/** What a run ends with, per replica: the full parameters, and the full gradient sums of each flush. */
interface RunResult {
  params: Params[];
  grads: Params[][];
}

const snapshotParams = (body: Record<string, unknown>): Params =>
  new Map(Object.entries((body.snapshot as { params: Record<string, Float32Array> }).params));

/** A TP (× DP) job on in-process groups, gathered across ranks as TP = 1 holds it. */
async function trainTp(j: TpJob): Promise<RunResult> {
  const D = j.D ?? 1;
  const shape: PipelineShape = { stages: j.P, chunks: 1, microbatches: j.M, splitBackward: j.split ?? false };
  const failures: unknown[] = [];
  const tpGroups = Array.from({ length: D * j.P }, () => new LocalGroup(j.T));
  const dpGroups = Array.from({ length: j.P * j.T }, () => new LocalGroup<Float64Array>(D));
  // flushed[r][it][s * T + rank]: that rank's gradient sums.
  const flushed: Params[][][] = Array.from({ length: D }, () => Array.from({ length: ITERATIONS }, () => []));
  const replicas = Array.from({ length: D }, (_, r) =>
    Array.from({ length: j.P }, (_, s) =>
      Array.from({ length: j.T }, (_, rank) => {
        const dp: ReplicaGroup = { replica: r, replicas: D, allReduce: dpGroups[s * j.T + rank]!.member(r) };
        const allReduce = shuffled(tpGroups[r * j.P + s]!.member(rank), j.seed ?? 0, rank + 10 * r);
        const onFlush = (it: number, g: ReadonlyMap<string, Float32Array>) =>
          (flushed[r]![it]![s * j.T + rank] = new Map([...g].map(([n, v]) => [n, Float32Array.from(v)])));
        const tp = { rank, ranks: j.T, allReduce, fail: (e: unknown) => failures.push(e) };
        return new TpTrainingCompute(s, shape, j.t, tp, { dp, onFlush });
      }),
    ),
  );
  const model = tpModelFor(j.t, corpusFor(j.t).vocabSize, j.T);
  /** Per stage, its ranks' maps gathered; the stages' maps merged. */
  const gather = (perStageRank: Params[]) => {
    const full: Params = new Map();
    for (let s = 0; s < j.P; s++) {
      const ranks = perStageRank.slice(s * j.T, (s + 1) * j.T);
      assertReplicatedEqual(model, ranks);
      for (const [n, v] of gatherRanks(model, ranks)) full.set(n, v);
    }
    return full;
  };
  try {
    const finals: Params[][] = replicas.map(() => []);
    await Promise.all(
      replicas.map((stages, r) =>
        drive(stages, shape, ITERATIONS, async (it) => {
          const bodies = await Promise.all(stages.flat().map((c) => c.endIteration(it)));
          if (it === ITERATIONS - 1) finals[r] = bodies.map(snapshotParams);
        }),
      ),
    );
    assert.deepEqual(failures, []);
    return { params: finals.map(gather), grads: flushed.map((its) => its.map(gather)) };
  } finally {
    for (const c of replicas.flat(2)) c.dispose();
  }
}

/** The TP = 1 compute (TrainingCompute), P stages, as the reference; D replicas when given. */
async function trainPlain(t: TrainConfig, P: number, M: number, D = 1): Promise<RunResult> {
  const shape: PipelineShape = { stages: P, chunks: 1, microbatches: M, splitBackward: false };
  const groups = Array.from({ length: P }, () => new LocalGroup<Float64Array>(D));
  const grads: Params[][] = Array.from({ length: D }, () => Array.from({ length: ITERATIONS }, () => new Map()));
  const replicas = Array.from({ length: D }, (_, r) =>
    Array.from({ length: P }, (_, s) => {
      const dp: ReplicaGroup = { replica: r, replicas: D, allReduce: groups[s]!.member(r) };
      const onFlush = (it: number, g: ReadonlyMap<string, Float32Array>) => {
        for (const [n, v] of g) grads[r]![it]!.set(n, Float32Array.from(v));
      };
      return [new TrainingCompute(s, shape, t, undefined, { dp: D > 1 ? dp : undefined, onFlush })];
    }),
  );
  const params: Params[] = replicas.map(() => new Map());
  try {
    await Promise.all(
      replicas.map((stages, r) =>
        drive(stages, shape, ITERATIONS, async (it) => {
          const bodies = await Promise.all(stages.map(([c]) => c!.endIteration(it)));
          if (it === ITERATIONS - 1)
            for (const b of bodies) for (const [n, v] of snapshotParams(b)) params[r]!.set(n, v);
        }),
      ),
    );
  } finally {
    for (const c of replicas.flat(2)) c.dispose();
  }
  return { params, grads };
}

/** P = 2 stages of TP = T ranks (the TP = 1 compute when T is 1), D replicas of M microbatches. */
const trainDp = (t: TrainConfig, T: number, M: number, D: number) =>
  T === 1 ? trainPlain(t, 2, M, D) : trainTp({ t, P: 2, T, M, D });

/** Replicated parameters (norms, embeddings, head, the row-parallel biases) are bitwise the same on every rank. */
function assertReplicatedEqual(model: ReturnType<typeof tpModelFor>, ranks: readonly Params[]) {
  const index = shardIndex(model);
  for (const [n, v] of ranks[0]!) {
    if (index.get(n)!.axis !== undefined) continue;
    for (const other of ranks.slice(1)) assert.deepEqual(other.get(n), v, `replicated ${n} differs between ranks`);
  }
}

const maxAbs = (x: Float32Array) => x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);

/**
 * The key biases' gradient is zero in exact arithmetic (softmax does not change when the same
 * q·bk is added to a query's every score), so both runs see rounding noise there: checked to be
 * noise (below 1e-6 of the keys' weight gradient) instead of compared.
 */
const ZERO_GRADIENT = /attn\.bk$/;

/**
 * The first flush's gradients (both runs at the same initial parameters) agree to `rtol` of
 * each tensor's scale (max |g| of the reference). Later flushes start from parameters that
 * the optimizer has already moved apart (see assertParamsClose), so they are not compared.
 */
function assertGradientsClose(got: Params[], want: Params[], rtol: number) {
  want.slice(0, 1).forEach((w, it) => {
    for (const [n, b] of w) {
      const a = got[it]!.get(n)!;
      if (ZERO_GRADIENT.test(n)) {
        const scale = maxAbs(w.get(n.replace(/bk$/, 'wk'))!);
        assert.ok(maxAbs(a) <= 1e-6 * scale && maxAbs(b) <= 1e-6 * scale, `${n}: not rounding noise`);
        continue;
      }
      const scale = maxAbs(b);
      let d = 0;
      for (let i = 0; i < b.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
      assert.ok(
        d <= rtol * scale,
        `iteration ${it}, gradient of ${n}: differs by ${d.toExponential(2)}, over ${rtol} × ${scale.toExponential(2)}`,
      );
    }
  });
}

/**
 * Parameters after the steps agree to `rtol` of each tensor's scale, plus what AdamW's own
 * conditioning lets the measured gradient differences become: its step m̂/(√v̂ + ε) moves by
 * up to about 2·lr·|δg|/ε when |g| is near ε, so an element whose gradient is rounding noise
 * (|g| ~ ε) may differ by a sizeable part of lr; everywhere else that allowance is tiny.
 */
function assertParamsClose(
  got: Params,
  want: Params,
  gotGrads: Params[],
  wantGrads: Params[],
  t: TrainConfig,
  rtol: number,
) {
  const lr = (it: number) =>
    lrAt({ peak: t.lr, warmupSteps: t.warmup, totalSteps: Math.max(t.totalIterations, t.warmup + 1) }, it + 1);
  const eps = 1e-8;
  let worst = { excess: 0, what: '' };
  for (const [n, b] of want) {
    const a = got.get(n)!;
    const scale = maxAbs(b);
    for (let i = 0; i < b.length; i++) {
      let allowance = rtol * scale;
      wantGrads.forEach(
        (g, it) => (allowance += (2 * lr(it) * Math.abs(gotGrads[it]!.get(n)![i]! - g.get(n)![i]!)) / eps),
      );
      const excess = Math.abs(a[i]! - b[i]!) / allowance;
      if (excess > worst.excess)
        worst = { excess, what: `${n}[${i}]: ${a[i]} vs ${b[i]}, allowed ${allowance.toExponential(2)}` };
    }
  }
  assert.ok(worst.excess <= 1, `parameters differ beyond the tolerance at ${worst.what}`);
}

function assertRunsClose(got: RunResult, want: RunResult, t: TrainConfig, rtol: number, replica = 0) {
  assertGradientsClose(got.grads[replica]!, want.grads[0]!, rtol);
  assertParamsClose(got.params[replica]!, want.params[0]!, got.grads[replica]!, want.grads[0]!, t, rtol);
}

function assertBitwise(a: Params, b: Params) {
  assert.deepEqual([...a.keys()], [...b.keys()]);
  for (const [n, x] of a) assert.deepEqual(x, b.get(n), n);
}

describe('tensor-parallel compute (Megatron split) on an in-process group', function () {
  this.timeout(600000);
  before(async () => {
    await loadBackend({ force: 'cpu' });
  });

  for (const model of ['gpt', 'mlp'] as const)
    for (const T of [2, 4])
      for (const P of [1, 2])
        it(`${model}, TP=${T}, P=${P}: the first gradients and the parameters after ${ITERATIONS} steps equal TP=1 (rtol 1e-5)`, async () => {
          const t = tiny(model);
          assertRunsClose(await trainTp({ t, P, T, M: 3 }), await trainPlain(t, P, 3), t, 1e-5);
        });

  it('gives bitwise the same parameters whatever order the ranks reach the all-reduces in', async () => {
    const t = tiny('gpt');
    const a = await trainTp({ t, P: 2, T: 2, M: 2, seed: 1 });
    const b = await trainTp({ t, P: 2, T: 2, M: 2, seed: 2 });
    assertBitwise(a.params[0]!, b.params[0]!);
  });

  it('a split backward (B, then W) reaches bitwise the parameters of the whole backward', async () => {
    const t = tiny('gpt');
    const a = await trainTp({ t, P: 2, T: 2, M: 2 });
    const b = await trainTp({ t, P: 2, T: 2, M: 2, split: true });
    assertBitwise(a.params[0]!, b.params[0]!);
  });

  for (const model of ['gpt', 'mlp'] as const)
    it(`${model}: TP=2 × DP=2 equals TP=1 with 2·M microbatches (rtol 1e-5), the replicas bitwise alike`, async () => {
      const t = tiny(model);
      const got = await trainTp({ t, P: 2, T: 2, M: 2, D: 2 });
      assertBitwise(got.params[0]!, got.params[1]!);
      assertRunsClose(got, await trainPlain(t, 2, 4), t, 1e-5);
    });

  it('a failed collective is reported through fail, with the rank still usable for dispose', async () => {
    const t = tiny('gpt');
    const shape: PipelineShape = { stages: 2, chunks: 1, microbatches: 1, splitBackward: false };
    const before = tf.memory().numTensors;
    const failed = new Promise<unknown>((resolve) => {
      const allReduce: AllReduce = () => Promise.reject(new Error('peer rank 1 stopped answering'));
      const c = new TpTrainingCompute(0, shape, t, { rank: 0, ranks: 2, allReduce, fail: resolve });
      c.run(0, task('F', 0, 0), () => resolve(new Error('F finished without its all-reduce')));
      setTimeout(() => c.dispose(), 50);
    });
    assert.match(String(await failed), /peer rank 1 stopped answering/);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(tf.memory().numTensors, before);
  });

  it('leaves no tensor behind after training', async () => {
    const t = tiny('gpt');
    await trainTp({ t, P: 2, T: 2, M: 2 });
    const before = tf.memory().numTensors;
    await trainTp({ t, P: 2, T: 2, M: 2, split: true });
    assert.equal(tf.memory().numTensors, before);
  });
});

describe('data-parallel replicas of the compute', function () {
  this.timeout(600000);
  before(async () => {
    await loadBackend({ force: 'cpu' });
  });

  // With one microbatch per replica the two layouts add the same float32 gradients in the same
  // order, so M = 1 holds with any accumulation: each microbatch's gradient (same data, weights,
  // shapes and loss scale) is bitwise the same whether a replica or one pipeline computes it.
  // With M = 3 the sums are grouped differently ((g0+g1+g2) + (g3+g4+g5) against one running
  // sum): the float64 accumulation, rounded once after the replicas' all-reduce, makes that bitwise too.
  for (const model of ['gpt', 'mlp'] as const)
    for (const T of [1, 2])
      for (const M of [1, 3])
        it(`${model}, TP=${T}: DP=2 with ${M} microbatch(es) each gives bitwise the gradients and parameters of DP=1 with ${2 * M}, on both replicas`, async () => {
          const t = tiny(model);
          const got = await trainDp(t, T, M, 2);
          const want = await trainDp(t, T, 2 * M, 1);
          for (const r of [0, 1]) {
            for (let it = 0; it < ITERATIONS; it++) assertBitwise(got.grads[r]![it]!, want.grads[0]![it]!);
            assertBitwise(got.params[r]!, want.params[0]!);
          }
        });
});
