// Real compute for one tensor-parallel rank of a stage (synchronous training): the rank's
// share of each chunk (models/tp/tp-stage.ts) runs F, B and W, meeting its peers only
// through the AllReduce it is given, so a task is asynchronous (it waits for the group's
// collectives between its segments). As in TrainingCompute, gradients are folded in
// microbatch order and the AdamW step runs at the flush, after the replicas' all-reduce
// when the job is data-parallel; replicated parameters stay identical on every rank
// because every rank computes them from the same all-reduced values.
//
// Construct it as
//   new TpTrainingCompute(stage, shape, train, { rank, ranks, allReduce, fail }, { dp, resume })
// with `rank` of `ranks` (T) in the stage's TP group, `allReduce` summing across that group
// in rank order, `fail` told of an error in a task (run() has no error path of its own:
// give it the runtime's fail), `dp` the stage-and-rank's ReplicaGroup, `resume` a snapshot,
// `onFlush` an observer of the gradient sums each flush steps with.
//
// Not modelled: a split backward's W doing work of its own (B computes the weight
// gradients, W folds them in), kept segment tapes (the backward recomputes each segment).

import * as tf from '@tensorflow/tfjs';
import type { AllReduce } from '../models/all-reduce';
import { PipelineShape, Task, formatTask, isLossStage, virtualStage } from '../policies/task';
import { Corpus } from '../models/data';
import { planPartition } from '../models/partition';
import { TrainConfig, batchFor, corpusFor, modelSpecFor } from '../models/train-config';
import { TpKept, TpStage, buildTpStage } from '../models/tp/tp-stage';
import { tpModelFor } from '../models/tp/tp-layers';
import { toPayload } from '../models/tensor-io';
import { TensorPayload } from '../transport/envelope';
import { StageCompute } from '../stage/compute';
import { ChunkState, StageSnapshot, TrainingComputeError, restoreChunks } from './chunk-optimizer';
import { MESSAGE_ALLOWANCE, checkReceived, hiddenShapeFor, tensorMessageBytes } from './training-boundary';
import {
  FlushObserver,
  ReplicaGroup,
  checkReplicaGroup,
  dataMicrobatch,
  lossScaleFor,
  replicaReduceMessage,
} from './replica-reduce';
import { SyncChunks, TaskTensors, chunkOfKey, chunkStateFor, taskKey as key } from './sync-chunks';

/** This rank's place in its stage's TP group. */
export interface TpRank {
  readonly rank: number;
  readonly ranks: number;
  /** Sums across the group's ranks, in rank order. */
  readonly allReduce: AllReduce;
  /** Told of an error inside a task (a failed collective, a tfjs error). */
  readonly fail: (err: unknown) => void;
}

/** The TP stages of `stage`, one per chunk, cut where the TP = 1 partition cuts. */
export function tpStageModules(stage: number, shape: PipelineShape, train: TrainConfig, rank: number, ranks: number) {
  const vocab = corpusFor(train).vocabSize;
  const model = tpModelFor(train, vocab, ranks);
  const plan = planPartition(modelSpecFor(train, vocab), { stages: shape.stages, chunks: shape.chunks });
  return Array.from({ length: shape.chunks }, (_, c) => buildTpStage(model, plan, virtualStage(stage, c, shape), rank));
}

export class TpTrainingCompute implements StageCompute {
  readonly kind = 'tfjs-tp';
  /** Real tfjs compute on this thread between its collectives. */
  readonly blocking = true;
  private readonly corpus: Corpus;
  private readonly hidden: number[];
  private readonly sync: SyncChunks<TpStage>;
  private readonly chunks: ChunkState<TpStage>[];
  private readonly tensors = new TaskTensors();
  private readonly kept = new Map<string, TpKept>();
  /** Split backward: the weight gradients each B computed, for its W. */
  private readonly weightGrads = new Map<string, tf.Tensor[]>();
  private readonly dp?: ReplicaGroup;

  constructor(
    private readonly stage: number,
    private readonly shape: PipelineShape,
    private readonly train: TrainConfig,
    private readonly tp: TpRank,
    opts: { dp?: ReplicaGroup; resume?: StageSnapshot; onFlush?: FlushObserver } = {},
  ) {
    if (opts.dp) checkReplicaGroup(opts.dp);
    this.dp = opts.dp;
    this.corpus = corpusFor(train);
    this.hidden = hiddenShapeFor(train, this.corpus.vocabSize);
    this.chunks = tpStageModules(stage, shape, train, tp.rank, tp.ranks).map((m) => chunkStateFor(m, train));
    this.sync = new SyncChunks(stage, shape, train, this.chunks, opts.dp, opts.onFlush);
    if (opts.resume) restoreChunks(stage, this.chunks, opts.resume);
  }

  checkArrival(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void {
    checkReceived(this.stage, kind, mb, chunk, tensors, this.hidden);
  }

  largestMessages(): readonly { what: string; bytes: number }[] {
    const params = this.sync.paramCount();
    const out = [
      { what: 'an activation, gradient or TP all-reduce message', bytes: tensorMessageBytes(this.hidden) },
      { what: 'the report carrying its parameters and AdamW moments', bytes: 3 * 4 * params + MESSAGE_ALLOWANCE },
    ];
    if (this.dp) out.push(replicaReduceMessage(params));
    return out;
  }

  accept(iteration: number, kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]) {
    this.tensors.accept(iteration, kind, mb, chunk, tensors);
  }

  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[]) => void): void {
    const work = t.kind === 'F' ? this.forward(iteration, t) : this.backward(iteration, t);
    work.then(done, (err: unknown) => this.tp.fail(err));
  }

  /** The collective's name, the same on every rank: iteration and task, then the step. */
  private collectiveKey(iteration: number, t: Task): string {
    return `it${iteration}/${formatTask(t)}`;
  }

  private batch(iteration: number, mb: number) {
    return batchFor(this.train, this.corpus, 'train', iteration, dataMicrobatch(this.dp, this.shape.microbatches, mb));
  }

  private async forward(iteration: number, t: Task): Promise<TensorPayload[]> {
    const k = key(iteration, t.mb, t.chunk);
    const module = this.chunks[t.chunk]!.module;
    const x =
      this.stage === 0 && t.chunk === 0
        ? tf.tensor(this.batch(iteration, t.mb).inputs, [this.train.microbatchSize, this.train.seq], 'int32')
        : this.tensors.takeInput(this.stage, k);
    this.tensors.saved.set(k, x);
    // The loss stage's forward runs with its backward, in B.
    if (module.isLast) return [];
    const { output, kept } = await module.forward(x, this.tp.allReduce, this.collectiveKey(iteration, t));
    this.kept.set(k, kept);
    const out = toPayload(output!);
    output!.dispose();
    return [out];
  }

  private async backward(iteration: number, t: Task): Promise<TensorPayload[]> {
    const k = key(iteration, t.mb, t.chunk);
    const c = this.chunks[t.chunk]!;
    if (t.kind === 'W') {
      const g = this.weightGrads.get(k);
      if (!g) throw new TrainingComputeError(`stage ${this.stage}: W${t.mb}@${t.chunk} without its B`);
      this.weightGrads.delete(k);
      this.sync.addParamGrads(c, t.mb, g);
      return [];
    }
    const x = this.tensors.saved.get(k);
    if (!x) throw new TrainingComputeError(`stage ${this.stage}: ${formatTask(t)} without its forward input`);
    const last = isLossStage(this.stage, t.chunk, this.shape);
    const dy = last ? null : (this.tensors.grads.get(k) ?? null);
    if (!last && !dy)
      throw new TrainingComputeError(`stage ${this.stage}: ${formatTask(t)} without its output gradient`);
    const ck = this.collectiveKey(iteration, t);
    let targets: tf.Tensor | undefined;
    try {
      let kept = this.kept.get(k);
      this.kept.delete(k);
      if (last) {
        kept = (await c.module.forward(x, this.tp.allReduce, ck)).kept;
        const b = this.batch(iteration, t.mb);
        targets = tf.tensor(b.targets, [...b.targetShape], 'int32');
      }
      if (!kept) throw new TrainingComputeError(`stage ${this.stage}: ${formatTask(t)} without its kept forward`);
      const lossScale = lossScaleFor(this.dp, this.shape.microbatches);
      const res = await c.module.backward(kept, dy, this.tp.allReduce, ck, targets && { targets, lossScale });
      this.sync.addLoss(res.loss);
      if (this.shape.splitBackward) this.weightGrads.set(k, res.paramGrads);
      else this.sync.addParamGrads(c, t.mb, res.paramGrads);
      const out = res.gradInput ? [toPayload(res.gradInput)] : [];
      res.gradInput?.dispose();
      return out;
    } finally {
      targets?.dispose();
      this.tensors.free(k, x, dy);
    }
  }

  /** The flush: the replicas' all-reduce (data-parallel jobs), then one AdamW step per chunk. */
  endIteration(iteration: number): Promise<Record<string, unknown>> {
    return this.sync.endIteration(iteration, { rank: this.tp.rank });
  }

  /** This rank's parameters (its slices, under the full parameters' names) and AdamW moments. */
  snapshot(): StageSnapshot {
    return this.sync.snapshot();
  }

  dispose(): void {
    this.tensors.dispose();
    for (const [k, kept] of this.kept) this.chunks[chunkOfKey(k)]?.module.release(kept);
    for (const g of this.weightGrads.values()) tf.dispose(g);
    for (const c of this.chunks) c.module.dispose();
  }
}
