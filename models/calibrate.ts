// Calibration: how fast this process computes on the backend it has, in GFLOP/s, from two
// short measurements — an n×n matMul, and a forward + backward of a reference pipeline stage
// (the middle blocks of a char-GPT, no embedding or head). A node's calibrated speed is what
// a speed-aware partition weighs its stage by (models/partition.ts).
//
// Each measurement runs once unmeasured (the wasm code tiers up), then repeats within a time
// budget; the figure is the median run. A stage step counts forward + backward as 3 × the
// forward FLOPs (the backward from the kept tape, no recomputed forward).
//
// Not measured: memory bandwidth on its own, messaging, and how the figure varies with
// shapes other than the reference ones.

import * as tf from '@tensorflow/tfjs';
import { performance } from 'perf_hooks';
import { gptSpec } from './gpt';
import { buildStage, planPartition } from './partition';

export interface CalibrationOptions {
  /** Side of the square matrices multiplied. */
  readonly matmulSize: number;
  /** The reference stage: blocks of a char-GPT of this width (4 heads), `seq` tokens, `batch` sequences. */
  readonly stageBlocks: number;
  readonly width: number;
  readonly seq: number;
  readonly batch: number;
  /** Time each measurement may take after its unmeasured run, ms (at least 3 runs are made). */
  readonly budgetMs: number;
}

export interface Measurement {
  readonly gflops: number;
  /** FLOPs of one run. */
  readonly flops: number;
  /** Median ms of one run, and how many were made. */
  readonly ms: number;
  readonly runs: number;
}

export interface Calibration {
  readonly backend: string;
  readonly matmul: Measurement & { readonly size: number };
  readonly stage: Measurement & {
    readonly blocks: number;
    readonly width: number;
    readonly seq: number;
    readonly batch: number;
  };
}

/** The median of `f`'s wall time over at least 3 runs within `budgetMs`, after one unmeasured run. */
function timeRuns(f: () => void, budgetMs: number): { ms: number; runs: number } {
  f();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < 3 || performance.now() - start < budgetMs) {
    const t0 = performance.now();
    f();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)], runs: times.length };
}

const measurement = (flops: number, t: { ms: number; runs: number }): Measurement => ({
  gflops: flops / (t.ms * 1e6),
  flops,
  ms: t.ms,
  runs: t.runs,
});

function calibrateMatmul(n: number, budgetMs: number): Measurement & { size: number } {
  const a = tf.randomUniform([n, n], -1, 1, 'float32', 1);
  const b = tf.randomUniform([n, n], -1, 1, 'float32', 2);
  try {
    // dataSync: the product is computed, not only scheduled.
    const t = timeRuns(() => tf.tidy(() => tf.matMul(a, b).dataSync()), budgetMs);
    return { ...measurement(2 * n * n * n, t), size: n };
  } finally {
    a.dispose();
    b.dispose();
  }
}

function calibrateStage(o: CalibrationOptions): Calibration['stage'] {
  // Blocks between an embedding stage and a head stage: stage 1 of 3 holds exactly stageBlocks.
  const spec = gptSpec({ layers: o.stageBlocks + 2, width: o.width, heads: 4, seqLen: o.seq });
  const plan = planPartition(spec, { stages: 3, weights: [1e-6, 1, 1e-6] });
  const stage = buildStage(spec, plan, 1);
  const x = tf.randomUniform(spec.hiddenShape(o.batch, o.seq), -1, 1, 'float32', 3);
  const dy = tf.randomUniform(spec.hiddenShape(o.batch, o.seq), -1, 1, 'float32', 4);
  try {
    const step = () => {
      const kept = stage.forwardKeepingActivations(x);
      const r = stage.backward(x, dy, { kept });
      r.gradInput?.dataSync();
      for (const g of r.paramGrads) g.dispose();
      r.gradInput?.dispose();
      kept.output.dispose();
    };
    const t = timeRuns(step, o.budgetMs);
    const blocks = plan.virtual[1].blockEnd - plan.virtual[1].blockStart;
    return {
      ...measurement(3 * stage.flopsPerSample * o.batch, t),
      blocks,
      width: o.width,
      seq: o.seq,
      batch: o.batch,
    };
  } finally {
    x.dispose();
    dy.dispose();
    stage.dispose();
  }
}

/** Both measurements on the backend tfjs has now (load one first: models/backend.ts). */
export function calibrate(o: CalibrationOptions): Calibration {
  return { backend: tf.getBackend(), matmul: calibrateMatmul(o.matmulSize, o.budgetMs), stage: calibrateStage(o) };
}
