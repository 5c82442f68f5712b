// Real compute for one stage: the tfjs stage modules of its chunks run F, B and W on
// tensors that travel in the messages. Synchronous training: parameter gradients of
// each microbatch are folded in microbatch order (policies/optim/ordered-sum.ts), and
// the AdamW step runs at the end of the iteration (the flush), so the result does not
// depend on the execution order. The stage module stays unaware of the pipeline.
// A forward keeps its activations for its backward (no recomputation). With a split
// backward, B computes the input gradient from them and W later the weight gradients
// from what B left (as zero-bubble schedules intend): bitwise the whole backward.
//
// Not modelled: gradient clipping (it would need a cross-stage all-reduce of norms),
// activation memory limits (the wasm heap guard in the stage modules still applies).

import * as tf from '@tensorflow/tfjs';
import { AdamW } from '../policies/optim/adamw';
import { OptimizerState } from '../policies/optim/optimizer';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { lrAt } from '../policies/optim/schedule';
import { PipelineShape, Task, isLossStage, virtualStage } from '../policies/task';
import { Corpus } from '../models/data';
import { buildStage, planPartition } from '../models/partition';
import { DeferredWeightGrads, KeptForward } from '../models/kept-tape';
import { StageModule } from '../models/stage-module';
import { TrainConfig, batchFor, corpusFor, modelSpecFor } from '../models/train-config';
import { TensorPayload } from '../transport/envelope';
import { ArrivalRefusedError, StageCompute } from '../stage/compute';
import { assignValues, fromPayload, paramInfos, readFloat32, toPayload } from '../models/tensor-io';

export class TrainingComputeError extends Error {
  override name = 'TrainingComputeError';
}

/** Parameters and optimizer moments of one stage, as they go into a checkpoint. */
export interface StageSnapshot {
  params: Record<string, Float32Array>;
  optimizer: OptimizerState[];
}

interface ChunkState {
  module: StageModule;
  names: string[];
  optimizer: AdamW;
  sum: OrderedSum | null;
}

const key = (it: number, mb: number, chunk: number) => `${it}|${mb}|${chunk}`;

/**
 * The stage modules of `stage`, one per chunk, partitioned the same way in every
 * process; balanced for backward passes that recompute their forward or not.
 */
export function stageModules(
  stage: number,
  shape: PipelineShape,
  train: TrainConfig,
  recomputedForward: boolean,
): StageModule[] {
  const spec = modelSpecFor(train, corpusFor(train).vocabSize);
  const plan = planPartition(spec, { stages: shape.stages, chunks: shape.chunks, recomputedForward });
  return Array.from({ length: shape.chunks }, (_, c) => buildStage(spec, plan, virtualStage(stage, c, shape)));
}

/**
 * What crosses a stage boundary in a training run: one float32 tensor of the model's
 * hidden shape. The first virtual stage's input is only the signal that its microbatch
 * is available (it reads the tokens itself), so it carries no tensor.
 */
export function checkReceived(
  stage: number,
  kind: 'input' | 'grad',
  mb: number,
  chunk: number,
  tensors: readonly TensorPayload[],
  hidden: readonly number[],
): void {
  if (kind === 'input' && stage === 0 && chunk === 0) {
    if (tensors.length > 0)
      throw new ArrivalRefusedError(
        `stage 0: the data signal for microbatch ${mb} carries ${tensors.length} tensors, expected none`,
      );
    return;
  }
  const what = kind === 'input' ? 'activation' : 'gradient';
  if (tensors.length !== 1)
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} carries ${tensors.length} tensors, expected 1`,
    );
  const p = tensors[0];
  if (p.dtype !== 'float32')
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} has dtype ${p.dtype}, expected float32`,
    );
  if (p.shape.length !== hidden.length || p.shape.some((d, i) => d !== hidden[i]))
    throw new ArrivalRefusedError(
      `stage ${stage}: ${what} for microbatch ${mb} has shape [${p.shape.join(',')}], expected [${hidden.join(',')}]`,
    );
}

/** Envelope fields, CBOR framing, parameter names and report fields around the tensor data: generous. */
export const MESSAGE_ALLOWANCE = 64 * 1024;

/** A message carrying one float32 tensor of `shape`. */
export function tensorMessageBytes(shape: readonly number[]): number {
  return 4 * shape.reduce((a, b) => a * b, 1) + MESSAGE_ALLOWANCE;
}

/** The shape `checkReceived` expects for a training config. */
export function hiddenShapeFor(train: TrainConfig, vocabSize: number): number[] {
  return modelSpecFor(train, vocabSize).hiddenShape(train.microbatchSize, train.seq);
}

export class TrainingCompute implements StageCompute {
  readonly kind = 'tfjs';
  readonly blocking = true;
  private readonly corpus: Corpus;
  private readonly hidden: number[];
  private readonly chunks: ChunkState[];
  private readonly received = new Map<string, tf.Tensor>();
  private readonly grads = new Map<string, tf.Tensor>();
  private readonly saved = new Map<string, tf.Tensor>();
  private readonly kept = new Map<string, KeptForward>();
  /** Split backward: what each B left for its W (and the last stage's targets, which the tape may read). */
  private readonly deferred = new Map<string, { deferred: DeferredWeightGrads; targets?: tf.Tensor }>();
  private lossSum = 0;
  private lossCount = 0;
  private step: number;

  constructor(
    private readonly stage: number,
    private readonly shape: PipelineShape,
    private readonly train: TrainConfig,
    resume?: StageSnapshot,
  ) {
    this.corpus = corpusFor(train);
    this.hidden = hiddenShapeFor(train, this.corpus.vocabSize);
    this.chunks = stageModules(stage, shape, train, false).map((module) => ({
      module,
      names: module.paramNames(),
      optimizer: new AdamW(paramInfos(module), { weightDecay: train.weightDecay }),
      sum: null,
    }));
    this.step = train.startIteration;
    if (resume) this.restore(resume);
  }

  checkArrival(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void {
    checkReceived(this.stage, kind, mb, chunk, tensors, this.hidden);
  }

  largestMessages(): readonly { what: string; bytes: number }[] {
    const params = this.chunks.reduce((n, c) => n + c.module.params().reduce((m, v) => m + v.size, 0), 0);
    return [
      { what: 'an activation or gradient message', bytes: tensorMessageBytes(this.hidden) },
      {
        what: 'the report carrying its parameters and AdamW moments (final, and every checkpoint)',
        bytes: 3 * 4 * params + MESSAGE_ALLOWANCE,
      },
    ];
  }

  /** Tensors that arrived with a message (checked by checkArrival): activations for F, gradients for B. */
  accept(
    iteration: number,
    kind: 'input' | 'grad',
    mb: number,
    chunk: number,
    tensors: readonly TensorPayload[],
  ): void {
    const map = kind === 'input' ? this.received : this.grads;
    map.get(key(iteration, mb, chunk))?.dispose();
    map.set(key(iteration, mb, chunk), fromPayload(tensors[0]));
  }

  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void {
    const out = t.kind === 'F' ? this.forward(iteration, t) : this.backward(iteration, t);
    done(out);
  }

  private take(map: Map<string, tf.Tensor>, k: string, what: string): tf.Tensor {
    const x = map.get(k);
    if (!x) throw new TrainingComputeError(`stage ${this.stage}: no ${what} for ${k} (iteration|microbatch|chunk)`);
    map.delete(k);
    return x;
  }

  private forward(iteration: number, t: Task): TensorPayload[] {
    const k = key(iteration, t.mb, t.chunk);
    const c = this.chunks[t.chunk];
    const x =
      this.stage === 0 && t.chunk === 0
        ? tf.tensor(batchFor(this.train, this.corpus, 'train', iteration, t.mb).inputs, this.inputShape(), 'int32')
        : this.take(this.received, k, 'input activation');
    this.saved.set(k, x);
    if (c.module.isLast) return [];
    const kept = c.module.forwardKeepingActivations(x);
    this.kept.set(k, kept);
    const y = kept.output;
    const out = toPayload(y);
    y.dispose();
    return [out];
  }

  private inputShape(): number[] {
    return [this.train.microbatchSize, this.train.seq];
  }

  private targets(iteration: number, mb: number): tf.Tensor {
    const b = batchFor(this.train, this.corpus, 'train', iteration, mb);
    return tf.tensor(b.targets, [...b.targetShape], 'int32');
  }

  /**
   * What a backward (or a split backward's B) of `t` works from: the forward's input and
   * kept tape (taken out of `kept`), the output gradient, and on the loss stage the
   * targets, which the caller disposes.
   */
  private backwardOperands(iteration: number, t: Task) {
    const k = key(iteration, t.mb, t.chunk);
    const last = isLossStage(this.stage, t.chunk, this.shape);
    const x = this.saved.get(k);
    if (!x)
      throw new TrainingComputeError(`stage ${this.stage}: ${t.kind}${t.mb}@${t.chunk} without its forward input`);
    const dy = last ? null : (this.grads.get(k) ?? null);
    if (!last && !dy)
      throw new TrainingComputeError(`stage ${this.stage}: ${t.kind}${t.mb}@${t.chunk} without its output gradient`);
    const kept = this.kept.get(k);
    this.kept.delete(k);
    const targets = last ? this.targets(iteration, t.mb) : undefined;
    return { k, c: this.chunks[t.chunk], x, dy, kept, targets, lossScale: 1 / this.shape.microbatches };
  }

  private backward(iteration: number, t: Task): TensorPayload[] {
    if (this.shape.splitBackward)
      return t.kind === 'B' ? this.backwardInput(iteration, t) : this.backwardWeights(iteration, t);
    const { k, c, x, dy, kept, targets, lossScale } = this.backwardOperands(iteration, t);
    const res = c.module.backward(x, dy, { targets, lossScale, kept });
    targets?.dispose();
    this.addLoss(res.loss);
    this.addParamGrads(c, t.mb, res.paramGrads);
    const out = res.gradInput ? [toPayload(res.gradInput)] : [];
    res.gradInput?.dispose();
    this.freeInputs(k, x, dy);
    return out;
  }

  /** B of a split backward: the input gradient; the weight half waits for W. */
  private backwardInput(iteration: number, t: Task): TensorPayload[] {
    const { k, c, x, dy, kept, targets, lossScale } = this.backwardOperands(iteration, t);
    let res;
    try {
      res = c.module.backwardInput(x, dy, { kept, targets, lossScale });
    } catch (err) {
      targets?.dispose();
      throw err;
    }
    this.deferred.set(k, { deferred: res.deferred, targets });
    this.addLoss(res.loss);
    const out = res.gradInput ? [toPayload(res.gradInput)] : [];
    res.gradInput?.dispose();
    return out;
  }

  /** W of a split backward: the weight gradients B deferred. */
  private backwardWeights(iteration: number, t: Task): TensorPayload[] {
    const k = key(iteration, t.mb, t.chunk);
    const c = this.chunks[t.chunk];
    const d = this.deferred.get(k);
    if (!d) throw new TrainingComputeError(`stage ${this.stage}: W${t.mb}@${t.chunk} without its B`);
    this.deferred.delete(k);
    try {
      this.addParamGrads(c, t.mb, c.module.backwardWeights(d.deferred));
    } finally {
      d.targets?.dispose();
    }
    this.freeInputs(k, this.saved.get(k) ?? null, this.grads.get(k) ?? null);
    return [];
  }

  private addLoss(loss: number | undefined): void {
    if (loss === undefined) return;
    this.lossSum += loss;
    this.lossCount++;
  }

  private addParamGrads(c: ChunkState, mb: number, grads: tf.Tensor[]): void {
    if (grads.length === 0) return;
    if (!c.sum)
      c.sum = new OrderedSum(
        c.module.params().map((v) => v.size),
        this.shape.microbatches,
      );
    c.sum.add(
      mb,
      grads.map((g) => readFloat32(g)),
    );
    for (const g of grads) g.dispose();
  }

  /** The microbatch's forward input and output gradient, once its backward is complete. */
  private freeInputs(k: string, x: tf.Tensor | null, dy: tf.Tensor | null): void {
    this.saved.delete(k);
    x?.dispose();
    if (dy) {
      this.grads.delete(k);
      dy.dispose();
    }
  }

  /** The flush: one AdamW step per chunk with the microbatch-ordered sums. */
  async endIteration(iteration: number): Promise<Record<string, unknown>> {
    const lr = lrAt(
      {
        peak: this.train.lr,
        warmupSteps: this.train.warmup,
        totalSteps: Math.max(this.train.totalIterations, this.train.warmup + 1),
      },
      this.step + 1,
    );
    for (const c of this.chunks) {
      if (!c.sum) throw new TrainingComputeError(`stage ${this.stage}: iteration ${iteration} ended without gradients`);
      const grads = c.sum.result();
      const vars = c.module.params();
      const params = new Map(vars.map((v, i) => [c.names[i], readFloat32(v)]));
      const gmap = new Map(c.names.map((n, i) => [n, grads[i]]));
      const delta = c.optimizer.propose(params, gmap, lr);
      vars.forEach((v, i) => {
        const p = params.get(c.names[i])!;
        const d = delta.get(c.names[i])!;
        for (let j = 0; j < p.length; j++) p[j] += d[j];
        assignValues(v, p);
      });
      c.sum = null;
    }
    this.step++;
    const body: Record<string, unknown> = { lr, step: this.step };
    if (this.lossCount > 0) {
      body.loss = this.lossSum / this.lossCount;
      body.lossCount = this.lossCount;
    }
    this.lossSum = 0;
    this.lossCount = 0;
    const last = iteration === this.train.totalIterations - 1;
    const every = this.train.checkpointEvery;
    if (last || (every > 0 && (iteration + 1) % every === 0)) body.snapshot = this.snapshot();
    return body;
  }

  snapshot(): StageSnapshot {
    const params: Record<string, Float32Array> = {};
    for (const c of this.chunks) c.module.params().forEach((v, i) => (params[c.names[i]] = readFloat32(v)));
    return { params, optimizer: this.chunks.map((c) => c.optimizer.state()) };
  }

  private restore(s: StageSnapshot): void {
    this.chunks.forEach((c, ci) => {
      c.module.params().forEach((v, i) => {
        const p = s.params[c.names[i]];
        if (!p)
          throw new TrainingComputeError(
            `stage ${this.stage}: checkpoint lacks parameter ${c.names[i]} (${v.size} values)`,
          );
        if (p.length !== v.size)
          throw new TrainingComputeError(
            `stage ${this.stage}: checkpoint parameter ${c.names[i]} has ${p.length} values, this model's has ${v.size} (another corpus vocabulary or model size?)`,
          );
        assignValues(v, Float32Array.from(p));
      });
      const st = s.optimizer[ci];
      if (!st)
        throw new TrainingComputeError(`stage ${this.stage}: checkpoint lacks the optimizer state of chunk ${ci}`);
      c.optimizer.load(st);
    });
  }

  dispose(): void {
    for (const m of [this.received, this.grads, this.saved]) for (const t of m.values()) t.dispose();
    for (const [k, kept] of this.kept) this.chunks[Number(k.split('|')[2])]?.module.releaseKept(kept);
    for (const [k, d] of this.deferred) {
      this.chunks[Number(k.split('|')[2])]?.module.releaseDeferred(d.deferred);
      d.targets?.dispose();
    }
    for (const c of this.chunks) c.module.dispose();
  }
}
