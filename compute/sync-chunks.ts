// What both synchronous trainings (TrainingCompute and TpTrainingCompute) keep between a
// stage's tasks and do at the flush: the tensors that arrived or wait for a backward,
// each chunk's microbatch-ordered gradient sum, the loss average, and the end of an
// iteration (the replicas' all-reduce, one AdamW step per chunk, the report's body).

import * as tf from '@tensorflow/tfjs';
import { AdamW } from '../policies/optim/adamw';
import { OrderedSum } from '../policies/optim/ordered-sum';
import { lrAt } from '../policies/optim/schedule';
import { PipelineShape } from '../policies/task';
import { StageModule } from '../models/stage-module';
import { TrainConfig } from '../models/train-config';
import { fromPayload, paramInfos, viewFloat32 } from '../models/tensor-io';
import { nativeAccumulate } from '../models/native-adamw';
import { TensorPayload } from '../transport/envelope';
import {
  ChunkState,
  ParamHolder,
  StageSnapshot,
  TrainingComputeError,
  snapshotChunks,
  stepChunk,
} from './chunk-optimizer';
import { FlushObserver, ReplicaGroup, finishSums } from './replica-reduce';

/** The key of a task's tensors: iteration, microbatch and chunk. */
export const taskKey = (it: number, mb: number, chunk: number) => `${it}|${mb}|${chunk}`;

/** The chunk index of a taskKey. */
export const chunkOfKey = (k: string) => Number(k.split('|')[2]);

/** A chunk's optimizer state around its module, with no gradients summed yet. */
export function chunkStateFor<M extends Pick<StageModule, 'params' | 'paramNames'>>(
  module: M,
  train: TrainConfig,
): ChunkState<M> {
  return {
    module,
    names: module.paramNames(),
    optimizer: new AdamW(paramInfos(module), { weightDecay: train.weightDecay }),
    sum: null,
  };
}

/** Activations that arrived (received), output gradients (grads) and forward inputs kept for the backward (saved). */
export class TaskTensors {
  readonly received = new Map<string, tf.Tensor>();
  readonly grads = new Map<string, tf.Tensor>();
  readonly saved = new Map<string, tf.Tensor>();

  accept(iteration: number, kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]) {
    const map = kind === 'input' ? this.received : this.grads;
    map.get(taskKey(iteration, mb, chunk))?.dispose();
    map.set(taskKey(iteration, mb, chunk), fromPayload(tensors[0]));
  }

  /** The input activation that arrived for `k`, taken out of `received`. */
  takeInput(stage: number, k: string): tf.Tensor {
    const x = this.received.get(k);
    if (!x) throw new TrainingComputeError(`stage ${stage}: no input activation for ${k} (iteration|microbatch|chunk)`);
    this.received.delete(k);
    return x;
  }

  /** The microbatch's forward input and output gradient, once its backward is complete. */
  free(k: string, x: tf.Tensor | null, dy: tf.Tensor | null): void {
    this.saved.delete(k);
    x?.dispose();
    if (dy) {
      this.grads.delete(k);
      dy.dispose();
    }
  }

  dispose(): void {
    for (const m of [this.received, this.grads, this.saved]) for (const x of m.values()) x.dispose();
  }
}

/** A stage's chunks with their gradient sums and the loss average, stepped at each flush. */
export class SyncChunks<M extends ParamHolder> {
  private lossSum = 0;
  /** Each chunk's sum of the last iteration, reused by the next (see OrderedSum.reset). */
  private readonly spare = new Map<ChunkState<M>, OrderedSum>();
  private lossCount = 0;
  private step: number;

  constructor(
    private readonly stage: number,
    private readonly shape: PipelineShape,
    private readonly train: TrainConfig,
    readonly chunks: ChunkState<M>[],
    private readonly dp: ReplicaGroup | undefined,
    private readonly onFlush: FlushObserver | undefined,
    /** Recovery: every this many flushes (0: never) the body carries the stage's state (`state`), which the sender sends apart from the report. */
    private readonly stateEvery = 0,
  ) {
    this.step = train.startIteration;
  }

  /** How many parameter values the chunks hold together. */
  paramCount(): number {
    return this.chunks.reduce((n, c) => n + c.module.params().reduce((m, v) => m + v.size, 0), 0);
  }

  addLoss(loss: number | undefined): void {
    if (loss === undefined) return;
    this.lossSum += loss;
    this.lossCount++;
  }

  /** Folds microbatch `mb`'s parameter gradients into the chunk's ordered sum and disposes them. */
  addParamGrads(c: ChunkState<M>, mb: number, grads: tf.Tensor[]): void {
    if (!c.sum)
      c.sum =
        this.spare.get(c)?.reset() ??
        new OrderedSum(
          c.module.params().map((v) => v.size),
          this.shape.microbatches,
          nativeAccumulate(),
        );
    c.sum.add(
      mb,
      grads.map((g) => viewFloat32(g)),
    );
    for (const g of grads) g.dispose();
  }

  /**
   * The flush: the replicas' all-reduce (data-parallel jobs), then one AdamW step per chunk with
   * the microbatch-ordered sums. The body has lr, step, then `extra`, the loss and, on the last
   * iteration and every checkpoint, the snapshot (else, on every stateEvery-th iteration, the same as `state`).
   */
  async endIteration(iteration: number, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const t = this.train;
    const lr = lrAt(
      { peak: t.lr, warmupSteps: t.warmup, totalSteps: Math.max(t.totalIterations, t.warmup + 1) },
      this.step + 1,
    );
    for (const c of this.chunks)
      if (!c.sum) throw new TrainingComputeError(`stage ${this.stage}: iteration ${iteration} ended without gradients`);
    await finishSums(this.chunks, iteration, this.dp, this.onFlush);
    for (const c of this.chunks) {
      stepChunk(c, c.sum!, lr);
      this.spare.set(c, c.sum!);
      c.sum = null;
    }
    this.step++;
    const body: Record<string, unknown> = { lr, step: this.step, ...extra };
    if (this.lossCount > 0) {
      body.loss = this.lossSum / this.lossCount;
      body.lossCount = this.lossCount;
    }
    this.lossSum = 0;
    this.lossCount = 0;
    const every = t.checkpointEvery;
    if (iteration === t.totalIterations - 1 || (every > 0 && (iteration + 1) % every === 0))
      body.snapshot = this.snapshot();
    else if (this.stateEvery > 0 && (iteration + 1) % this.stateEvery === 0) body.state = this.snapshot();
    return body;
  }

  snapshot(): StageSnapshot {
    return snapshotChunks(this.chunks);
  }
}
