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
import { PipelineShape, Task, isLossStage } from '../policies/task';
import { Corpus } from '../models/data';
import { StageModule } from '../models/stage-module';
import { DeferredWeightGrads, KeptForward } from '../models/kept-tape';
import { TrainConfig, batchFor, corpusFor } from '../models/train-config';
import { TensorPayload } from '../transport/envelope';
import { StageCompute } from '../stage/compute';
import { toPayload } from '../models/tensor-io';
import { ChunkState, StageSnapshot, TrainingComputeError, restoreChunks } from './chunk-optimizer';
import {
  MESSAGE_ALLOWANCE,
  checkReceived,
  hiddenShapeFor,
  stageModules,
  tensorMessageBytes,
} from './training-boundary';
import {
  FlushObserver,
  ReplicaGroup,
  checkReplicaGroup,
  dataMicrobatch,
  lossScaleFor,
  replicaReduceMessage,
} from './replica-reduce';
import { SyncChunks, TaskTensors, chunkOfKey, chunkStateFor, taskKey as key } from './sync-chunks';

export class TrainingCompute implements StageCompute {
  readonly kind = 'tfjs';
  readonly blocking = true;
  private readonly corpus: Corpus;
  private readonly hidden: number[];
  private readonly sync: SyncChunks<StageModule>;
  private readonly chunks: ChunkState[];
  private readonly tensors = new TaskTensors();
  private readonly kept = new Map<string, KeptForward>();
  /** Split backward: what each B left for its W (and the last stage's targets, which the tape may read). */
  private readonly deferred = new Map<string, { deferred: DeferredWeightGrads; targets?: tf.Tensor }>();

  constructor(
    private readonly stage: number,
    private readonly shape: PipelineShape,
    private readonly train: TrainConfig,
    resume?: StageSnapshot,
    /** dp: this stage's replica and the all-reduce across replicas (absent: one replica); onFlush: see FlushObserver;
     * weights: the stages' weights of a speed-aware partition (absent: balanced by FLOPs alone);
     * stateEvery: every this many flushes the stage reports its state for recovery (see SyncChunks). */
    private readonly opts: {
      dp?: ReplicaGroup;
      onFlush?: FlushObserver;
      weights?: readonly number[];
      stateEvery?: number;
    } = {},
  ) {
    if (opts.dp) checkReplicaGroup(opts.dp);
    this.corpus = corpusFor(train);
    this.hidden = hiddenShapeFor(train, this.corpus.vocabSize);
    this.chunks = stageModules(stage, shape, train, false, opts.weights).map((m) => chunkStateFor(m, train));
    this.sync = new SyncChunks(stage, shape, train, this.chunks, opts.dp, opts.onFlush, opts.stateEvery);
    if (resume) this.restore(resume);
  }

  checkArrival(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void {
    checkReceived(this.stage, kind, mb, chunk, tensors, this.hidden);
  }

  largestMessages(): readonly { what: string; bytes: number }[] {
    const params = this.sync.paramCount();
    return [
      { what: 'an activation or gradient message', bytes: tensorMessageBytes(this.hidden) },
      {
        what: 'the report carrying its parameters and AdamW moments (final, and every checkpoint)',
        bytes: 3 * 4 * params + MESSAGE_ALLOWANCE,
      },
      ...(this.opts.dp ? [replicaReduceMessage(params)] : []),
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
    this.tensors.accept(iteration, kind, mb, chunk, tensors);
  }

  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void {
    const out = t.kind === 'F' ? this.forward(iteration, t) : this.backward(iteration, t);
    done(out);
  }

  private forward(iteration: number, t: Task): TensorPayload[] {
    const k = key(iteration, t.mb, t.chunk);
    const c = this.chunks[t.chunk];
    const x =
      this.stage === 0 && t.chunk === 0
        ? tf.tensor(this.batch(iteration, t.mb).inputs, this.inputShape(), 'int32')
        : this.tensors.takeInput(this.stage, k);
    this.tensors.saved.set(k, x);
    if (c.module.isLast) return [];
    const kept = c.module.forwardKeepingActivations(x);
    this.kept.set(k, kept);
    const y = kept.output;
    const out = toPayload(y);
    y.dispose();
    return [out];
  }

  /** Local microbatch `mb`'s data (this replica's share of the iteration). */
  private batch(iteration: number, mb: number) {
    return batchFor(
      this.train,
      this.corpus,
      'train',
      iteration,
      dataMicrobatch(this.opts.dp, this.shape.microbatches, mb),
    );
  }

  private inputShape(): number[] {
    return [this.train.microbatchSize, this.train.seq];
  }

  private targets(iteration: number, mb: number): tf.Tensor {
    const b = this.batch(iteration, mb);
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
    const x = this.tensors.saved.get(k);
    if (!x)
      throw new TrainingComputeError(`stage ${this.stage}: ${t.kind}${t.mb}@${t.chunk} without its forward input`);
    const dy = last ? null : (this.tensors.grads.get(k) ?? null);
    if (!last && !dy)
      throw new TrainingComputeError(`stage ${this.stage}: ${t.kind}${t.mb}@${t.chunk} without its output gradient`);
    const kept = this.kept.get(k);
    this.kept.delete(k);
    const targets = last ? this.targets(iteration, t.mb) : undefined;
    const lossScale = lossScaleFor(this.opts.dp, this.shape.microbatches);
    return { k, c: this.chunks[t.chunk], x, dy, kept, targets, lossScale };
  }

  private backward(iteration: number, t: Task): TensorPayload[] {
    if (this.shape.splitBackward)
      return t.kind === 'B' ? this.backwardInput(iteration, t) : this.backwardWeights(iteration, t);
    const { k, c, x, dy, kept, targets, lossScale } = this.backwardOperands(iteration, t);
    const res = c.module.backward(x, dy, { targets, lossScale, kept });
    targets?.dispose();
    this.sync.addLoss(res.loss);
    this.addParamGrads(c, t.mb, res.paramGrads);
    const out = res.gradInput ? [toPayload(res.gradInput)] : [];
    res.gradInput?.dispose();
    this.tensors.free(k, x, dy);
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
    this.sync.addLoss(res.loss);
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
    this.tensors.free(k, this.tensors.saved.get(k) ?? null, this.tensors.grads.get(k) ?? null);
    return [];
  }

  private addParamGrads(c: ChunkState, mb: number, grads: tf.Tensor[]): void {
    if (grads.length > 0) this.sync.addParamGrads(c, mb, grads);
  }

  /** The flush: one AdamW step per chunk with the microbatch-ordered sums. */
  endIteration(iteration: number): Promise<Record<string, unknown>> {
    return this.sync.endIteration(iteration);
  }

  snapshot(): StageSnapshot {
    return this.sync.snapshot();
  }

  private restore(s: StageSnapshot): void {
    restoreChunks(this.stage, this.chunks, s);
  }

  dispose(): void {
    this.tensors.dispose();
    for (const [k, kept] of this.kept) this.chunks[chunkOfKey(k)]?.module.releaseKept(kept);
    for (const [k, d] of this.deferred) {
      this.chunks[chunkOfKey(k)]?.module.releaseDeferred(d.deferred);
      d.targets?.dispose();
    }
    for (const c of this.chunks) c.module.dispose();
  }
}
