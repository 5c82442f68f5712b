import { strict as assert } from 'assert';
import { DurationModelOptions, makeDurationModel, partitionProfile } from '../models/durations';
import { loadProfile } from '../models/profile';
import { PipelineShape, allTasks, task } from '../policies/task';

const uniform = loadProfile('uniform');
const llm = loadProfile('llm');
const multimodal = loadProfile('multimodal');

const shape = (stages: number, chunks = 1, splitBackward = false, microbatches = 4): PipelineShape => ({
  stages,
  chunks,
  microbatches,
  splitBackward,
});

const close = (a: number, b: number, what = '') =>
  assert.ok(Math.abs(a - b) < 1e-9 * (1 + Math.abs(b)), `${what}: ${a} != ${b}`);

function model(over: Partial<DurationModelOptions> = {}) {
  return makeDurationModel({ profile: llm, shape: shape(8), jitter: 'none', seed: 1, ...over });
}

describe('duration model', () => {
  describe('base costs', () => {
    it('gives uniform F=10 and B=20 per stage, split evenly over chunks, for any P and V', () => {
      for (const P of [1, 8, 64])
        for (const V of [1, 2, 3, 4]) {
          const d = makeDurationModel({ profile: uniform, shape: shape(P, V), jitter: 'none', seed: 0 });
          for (let s = 0; s < P; s++)
            for (let c = 0; c < V; c++) {
              close(d.base(s, 'F', c), 10 / V, `P=${P} V=${V} F`);
              close(d.base(s, 'B', c), 20 / V, `P=${P} V=${V} B`);
            }
        }
    });

    it('splits uniform backward into B=10 and W=10 per stage', () => {
      const d = makeDurationModel({ profile: uniform, shape: shape(4, 2, true), jitter: 'none', seed: 0 });
      close(d.base(3, 'B', 1), 5, 'B');
      close(d.base(3, 'W', 1), 5, 'W');
      close(d.base(0, 'F', 0), 5, 'F');
    });

    it('makes the llm last stage 1.5-2x a middle stage at P=8 and the first stage slightly heavier', () => {
      const d = model();
      for (const kind of ['F', 'B'] as const) {
        const ratio = d.base(7, kind, 0) / d.base(3, kind, 0);
        assert.ok(ratio >= 1.5 && ratio <= 2, `${kind} last/middle = ${ratio}`);
        assert.ok(d.base(0, kind, 0) > d.base(3, kind, 0));
        assert.ok(d.base(0, kind, 0) < 1.1 * d.base(3, kind, 0), 'the embedding is cheap');
      }
    });

    it('makes the multimodal vision stages less than half as heavy as the language stages at P=8 and P=32', () => {
      for (const P of [8, 32]) {
        const { forwardMs } = partitionProfile(multimodal, P, 1);
        const vision = forwardMs[1],
          language = forwardMs[P - 2];
        assert.ok(vision < 0.5 * language, `P=${P}: vision ${vision} vs language ${language}`);
        assert.ok(forwardMs[P - 1] > language, 'the LM head makes the last stage heaviest');
      }
    });

    it('keeps the total model cost whatever the partition for fixed-depth profiles', () => {
      for (const profile of [llm, multimodal]) {
        const total = profile.layers.reduce((sum, l) => sum + l.count * l.forwardMs, 0);
        for (const [P, V] of [
          [1, 1],
          [8, 1],
          [8, 3],
          [32, 4],
          [64, 4],
        ]) {
          const { forwardMs } = partitionProfile(profile, P, V);
          close(
            forwardMs.reduce((a, b) => a + b, 0),
            total,
            `${profile.name} P=${P} V=${V}`,
          );
        }
      }
    });

    it('gives chunk c of stage s the cost of virtual stage c*P+s', () => {
      const d = makeDurationModel({ profile: multimodal, shape: shape(4, 2), jitter: 'none', seed: 0 });
      const { forwardMs } = partitionProfile(multimodal, 4, 2);
      for (let s = 0; s < 4; s++) for (let c = 0; c < 2; c++) assert.equal(d.base(s, 'F', c), forwardMs[c * 4 + s]);
      assert.ok(d.base(0, 'F', 0) < d.base(0, 'F', 1), 'chunk 0 of stage 0 is vision, chunk 1 language');
    });
  });

  describe('messages', () => {
    it('costs latency plus bytes over bandwidth for llm activations and gradients', () => {
      const d = model();
      assert.equal(d.messageBytes(2, task('F', 0)), 2048 * 1536 * 2);
      assert.equal(d.messageBytes(2, task('B', 0)), 2048 * 1536 * 2);
      close(d.baseComm(2, task('F', 0)), 0.2 + 6291456 / 20e6, 'activation ms');
      close(d.comm(0, 2, task('B', 3)), d.baseComm(2, task('B', 3)), 'unjittered gradient');
    });

    it('sizes the gradient of a cut like the activation that crossed it the other way', () => {
      const d = makeDurationModel({ profile: multimodal, shape: shape(8), jitter: 'none', seed: 0 });
      assert.equal(d.messageBytes(2, task('F', 0)), 4096 * 1280 * 2, 'inside the vision encoder');
      assert.equal(d.messageBytes(5, task('F', 0)), 4096 * 2048 * 2, 'inside the language model');
      for (let s = 1; s < 8; s++) assert.equal(d.messageBytes(s, task('B', 0)), d.messageBytes(s - 1, task('F', 0)));
    });

    it('costs nothing on the uniform profile even under paper jitter', () => {
      const d = makeDurationModel({ profile: uniform, shape: shape(4), jitter: 'paper', seed: 3 });
      assert.equal(d.comm(0, 1, task('F', 2)), 0);
      assert.equal(d.comm(0, 1, task('B', 2)), 0);
    });

    it('refuses a message from the loss stage forward or from the first virtual stage backward', () => {
      const d = makeDurationModel({ profile: llm, shape: shape(4, 2), jitter: 'none', seed: 0 });
      assert.throws(() => d.comm(0, 3, task('F', 1, 1)), /stage 3, F1@1: the loss stage sends no activation/);
      assert.throws(() => d.comm(0, 0, task('B', 1, 0)), /stage 0, B1: the first virtual stage sends no gradient/);
      assert.throws(() => d.comm(0, 1, task('W', 1, 0)), /stage 1, W1: only F and B tasks send messages/);
      assert.ok(d.comm(0, 3, task('F', 1, 0)) > 0, 'stage 3 chunk 0 sends to stage 0 chunk 1');
      assert.ok(d.comm(0, 0, task('B', 1, 1)) > 0, 'stage 0 chunk 1 sends back to stage 3 chunk 0');
    });
  });

  describe('jitter', () => {
    it('refuses a message delay drawn over an hour, naming the task and the jitter scale, instead of failing in the codec; a long task is fine', () => {
      const heavy = {
        ...llm,
        communication: { ...llm.communication, latencyMs: 50, bandwidthGBps: 1, activationBytes: 1e6 },
      };
      const d = makeDurationModel({
        profile: heavy,
        shape: shape(3, 2, false, 5),
        jitter: 'paper',
        jitterScale: 4,
        seed: 2,
      });
      assert.throws(
        () => d.comm(0, 2, task('B', 4, 1)),
        /stage 2, B4@1: drew a communication time of \d+ ms, over the 1 h a message may be held; lower --jitter-scale \(now 4\)/,
      );
      const calm = makeDurationModel({
        profile: heavy,
        shape: shape(3, 2, false, 5),
        jitter: 'paper',
        jitterScale: 1,
        seed: 2,
      });
      assert.ok(calm.comm(0, 2, task('B', 4, 1)) < 3_600_000);
      const slow = makeDurationModel({
        profile: { ...uniform, layers: uniform.layers.map((l) => ({ ...l, forwardMs: 2_000_000 })) },
        shape: shape(2),
        jitter: 'none',
        seed: 0,
      });
      assert.ok(slow.compute(0, 1, task('B', 0)) > 3_600_000, 'a task may take hours');
    });

    const tasks = allTasks(shape(4, 2, true, 6));

    it('returns the base durations without jitter', () => {
      const d = model({ jitter: 'none', shape: shape(8, 1, true) });
      for (const t of allTasks(d.shape)) assert.equal(d.compute(5, 3, t), d.base(3, t.kind, t.chunk));
    });

    it('jitters compute only in compute mode', () => {
      const d = model({ jitter: 'compute', shape: shape(4, 2, true, 6) });
      let differ = 0;
      for (const t of tasks) {
        if (d.compute(0, 1, t) !== d.base(1, t.kind, t.chunk)) differ++;
        if (t.kind !== 'W') assert.equal(d.comm(0, 1, t), d.baseComm(1, t));
      }
      assert.equal(differ, tasks.length);
    });

    it('jitters compute and communication in paper mode, and nothing at scale 0', () => {
      const d = model({ jitter: 'paper', shape: shape(4, 2, true, 6) });
      const off = model({ jitter: 'paper', jitterScale: 0, shape: shape(4, 2, true, 6) });
      for (const t of tasks) {
        assert.notEqual(d.compute(0, 1, t), d.base(1, t.kind, t.chunk));
        assert.equal(off.compute(0, 1, t), off.base(1, t.kind, t.chunk));
        if (t.kind === 'W') continue;
        assert.notEqual(d.comm(0, 1, t), d.baseComm(1, t));
        assert.equal(off.comm(0, 1, t), off.baseComm(1, t));
      }
    });

    it('realizes the same durations for a seed whatever order they are asked in', () => {
      const opts = { jitter: 'paper' as const, shape: shape(4, 2, true, 6), seed: 42 };
      const a = model(opts),
        b = model(opts);
      const keys = tasks.flatMap((t) => [0, 1, 2, 3].map((s) => ({ s, t, it: t.mb % 3 })));
      const first = keys.map(({ s, t, it }) => a.compute(it, s, t));
      const second = [...keys]
        .reverse()
        .map(({ s, t, it }) => b.compute(it, s, t))
        .reverse();
      assert.deepEqual(second, first);
    });

    it('realizes different durations for different seeds and iterations', () => {
      const a = model({ jitter: 'paper', seed: 1 }),
        b = model({ jitter: 'paper', seed: 2 });
      const t = task('F', 0);
      assert.notEqual(a.compute(0, 2, t), b.compute(0, 2, t));
      assert.notEqual(a.compute(0, 2, t), a.compute(1, 2, t));
      assert.notEqual(a.comm(0, 2, t), b.comm(0, 2, t));
    });

    it('draws B and W independently when the backward is split', () => {
      const d = makeDurationModel({ profile: uniform, shape: shape(2, 1, true), jitter: 'compute', seed: 5 });
      assert.notEqual(d.compute(0, 0, task('B', 0)), d.compute(0, 0, task('W', 0)));
    });
  });

  describe('errors', () => {
    it('refuses W tasks when the backward is not split', () => {
      assert.throws(
        () => model().compute(0, 1, task('W', 0)),
        /stage 1: W tasks exist only when the backward is split/,
      );
    });

    it('refuses a stage or chunk outside the pipeline, quoting it', () => {
      assert.throws(() => model().base(8, 'F', 0), /stage must be an integer in 0\.\.7, got 8/);
      assert.throws(() => model().compute(0, 0, task('F', 0, 1)), /chunk must be an integer in 0\.\.0, got 1/);
    });

    it('refuses a seed that is not a safe integer', () => {
      assert.throws(() => model({ seed: 0.5 }), /seed must be a safe integer, got 0\.5/);
    });
  });
});
