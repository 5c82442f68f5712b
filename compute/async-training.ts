// Real (tfjs) stage compute in asynchronous mode: every task asks the parameter-store
// actor for its weights and tells it what ran, so the store can update after each
// backward and keep the in-flight microbatches consistent. Its emulated counterpart is
// AsyncEmulatedCompute (emulated.ts).
//
// Backward 'kept' (the default): F keeps its tape (through the loss on the last stage)
// and B backpropagates through it at the weights the store hands B, on the forward-time
// activations (models/kept-weights.ts). Backward 'recompute': B recomputes its forward
// at those weights (activation checkpointing), which changes the activations as well.

import * as tf from '@tensorflow/tfjs';
import { PipelineShape, Task, isLossStage } from '../policies/task';
import { Corpus } from '../models/data';
import { captureLinearInputs } from '../models/layers';
import { StageModule } from '../models/stage-module';
import { TrainConfig, batchFor, corpusFor } from '../models/train-config';
import { TensorPayload } from '../transport/envelope';
import { StageCompute } from '../stage/compute';
import { storeStats } from './emulated';
import { ParamMapF, StoreMsg } from '../actors/param-store';
import { ActorRef, ActorRuntime } from '../actors/runtime';
import { fromPayload, paramInfos, readFloat32, toPayload } from '../models/tensor-io';
import { ParamInfo } from '../policies/optim/params';
import { KeptForward, backwardFromTape } from '../models/kept-tape';
import { DetachedWeights, attachWeights, detachWeights } from '../models/kept-weights';
import type { BackwardMode } from '../actors/param-store';
import { TrainingComputeError } from './chunk-optimizer';
import * as boundary from './training-boundary';

export { controlTaus } from '../models/control-taus';

const key = (mb: number) => `${mb}`;

/** The module's parameters as plain arrays, in its fixed order (the store's initial state). */
export function initialParams(module: StageModule): { params: ParamMapF; infos: ParamInfo[] } {
  const names = module.paramNames();
  return { params: new Map(module.params().map((v, i) => [names[i], readFloat32(v)])), infos: paramInfos(module) };
}

/** Builds the single chunk module a stage trains in asynchronous mode (backward recomputes at the weights it is given). */
export function asyncStageModule(
  stage: number,
  shape: PipelineShape,
  train: TrainConfig,
  weights?: readonly number[],
): StageModule {
  return boundary.stageModules(stage, { ...shape, chunks: 1 }, train, true, weights)[0];
}

/** How long an aborted job's stage may take to send its state as it is (after a task under way). */
const LAST_SNAPSHOT_MS = 2000;

export interface AsyncTrainingOptions {
  readonly backwardMode?: BackwardMode;
  /** The job's microbatch this launch's microbatch 0 is (its data): not 0 after a recovery resumed the stream. */
  readonly firstMicrobatch?: number;
  /** The stage's parameter store keeps snapshots (then snapshotNow is defined). */
  readonly keepsSnapshots?: boolean;
}

/** Real compute in asynchronous mode (V = 1): weights come from the store for every task. */
export class AsyncTrainingCompute implements StageCompute {
  readonly kind = 'tfjs-async';
  private readonly corpus: Corpus;
  private readonly hidden: number[];
  private readonly names: string[];
  private readonly received = new Map<string, tf.Tensor>();
  private readonly grads = new Map<string, tf.Tensor>();
  private readonly saved = new Map<string, tf.Tensor>();
  private readonly losses: number[] = [];
  /** Backward 'kept': each in-flight microbatch's tape, and the (freed) weight tensors it was recorded with. */
  private readonly kept = new Map<string, { detached: DetachedWeights; weights: tf.Tensor[] }>();
  private readonly backwardMode: BackwardMode;
  /** The job's microbatch this launch's microbatch 0 is (its data): not 0 after a recovery resumed the stream. */
  private readonly firstMicrobatch: number;
  /** Defined when the stage's store keeps snapshots: send one of its state as it is now (stage/compute.ts). */
  readonly snapshotNow?: () => Promise<void>;

  constructor(
    private readonly runtime: ActorRuntime,
    private readonly stage: number,
    private readonly shape: PipelineShape,
    private readonly train: TrainConfig,
    private readonly module: StageModule,
    private readonly store: ActorRef<StoreMsg>,
    o: AsyncTrainingOptions = {},
  ) {
    this.backwardMode = o.backwardMode ?? 'kept';
    this.firstMicrobatch = o.firstMicrobatch ?? 0;
    // Only a store that keeps snapshots has one to send as the job is dropped.
    if (o.keepsSnapshots) this.snapshotNow = () => this.lastSnapshot();
    this.corpus = corpusFor(train);
    this.hidden = boundary.hiddenShapeFor(train, this.corpus.vocabSize);
    this.names = module.paramNames();
  }

  checkArrival(kind: 'input' | 'grad', mb: number, chunk: number, tensors: readonly TensorPayload[]): void {
    boundary.checkReceived(this.stage, kind, mb, chunk, tensors, this.hidden);
  }

  largestMessages(): readonly { what: string; bytes: number }[] {
    const params = this.module.params().reduce((n, v) => n + v.size, 0);
    return [
      { what: 'an activation or gradient message', bytes: boundary.tensorMessageBytes(this.hidden) },
      { what: 'the final report carrying its parameters', bytes: 4 * params + boundary.MESSAGE_ALLOWANCE },
    ];
  }

  accept(
    _iteration: number,
    kind: 'input' | 'grad',
    mb: number,
    _chunk: number,
    tensors: readonly TensorPayload[],
  ): void {
    const map = kind === 'input' ? this.received : this.grads;
    map.get(key(mb))?.dispose();
    map.set(key(mb), fromPayload(tensors[0]));
  }

  private async weights(purpose: 'forward' | 'backward', mb: number): Promise<tf.Tensor[]> {
    const w = await this.runtime.ask<StoreMsg, ReadonlyMap<string, Float32Array> | null>(
      this.store,
      (reply) => ({ type: 'weights', purpose, mb, reply }),
      60000,
    );
    if (!w) throw new TrainingComputeError(`stage ${this.stage}: the parameter store holds no parameters`);
    const vars = this.module.params();
    return this.names.map((n, i) => {
      const p = w.get(n);
      if (!p) throw new TrainingComputeError(`stage ${this.stage}: the store has no parameter ${n}`);
      return tf.tensor(p, vars[i].shape, 'float32');
    });
  }

  run(iteration: number, t: Task, done: (out?: readonly TensorPayload[], loss?: number) => void): void {
    const work = this.runtime.hold(t.kind === 'F' ? this.forward(iteration, t) : this.backward(iteration, t));
    // The loss stage's loss of this microbatch, once known, rides on the task's end (live progress).
    const lossOf = () => (isLossStage(this.stage, t.chunk, this.shape) ? this.losses[t.mb] : undefined);
    work.then(
      (out) => done(out, lossOf()),
      (err: Error) => this.runtime.fail(`compute-${this.stage}`, err),
    );
  }

  private async forward(iteration: number, t: Task): Promise<TensorPayload[]> {
    const x =
      this.stage === 0
        ? tf.tensor(
            batchFor(this.train, this.corpus, 'train', iteration, this.firstMicrobatch + t.mb).inputs,
            [this.train.microbatchSize, this.train.seq],
            'int32',
          )
        : this.take(this.received, t.mb, 'input activation');
    this.saved.set(key(t.mb), x);
    const w = await this.weights('forward', t.mb);
    const names = new Map(w.map((tensor, i) => [tensor.id, this.names[i]]));
    if (this.backwardMode === 'kept') return this.forwardKept(iteration, t, x, w, names);
    const { result: y, inputs } = captureLinearInputs(names, () => this.module.forward(x, w));
    tf.dispose(w);
    this.runtime.send(this.store, { type: 'forward-ran', mb: t.mb, inputs });
    const out = this.module.isLast ? [] : [toPayload(y)];
    y.dispose();
    return out;
  }

  private forwardKept(
    iteration: number,
    t: Task,
    x: tf.Tensor,
    w: tf.Tensor[],
    names: Map<number, string>,
  ): TensorPayload[] {
    const keep = this.module.forwardKeepingTapeAt?.bind(this.module);
    if (!keep)
      throw new TrainingComputeError(
        `stage ${this.stage}: module ${this.module.name} cannot keep its tape at given weights; use backward 'recompute'`,
      );
    const last = isLossStage(this.stage, t.chunk, this.shape);
    const b = last ? batchFor(this.train, this.corpus, 'train', iteration, this.firstMicrobatch + t.mb) : null;
    const targets = b ? tf.tensor(b.targets, [...b.targetShape], 'int32') : undefined;
    let run: { result: KeptForward; inputs: ReturnType<typeof captureLinearInputs>['inputs'] };
    try {
      run = captureLinearInputs(names, () => keep(x, w, targets));
    } finally {
      targets?.dispose();
    }
    const { result: k, inputs } = run;
    // The tape no longer holds these weights; the backward's go in their place.
    const detached = detachWeights(k, x, w);
    tf.dispose(w);
    this.kept.set(key(t.mb), { detached, weights: w });
    this.runtime.send(this.store, { type: 'forward-ran', mb: t.mb, inputs });
    if (last) this.losses[t.mb] = k.output.dataSync()[0]!;
    const out = last ? [] : [toPayload(k.output)];
    k.output.dispose();
    return out;
  }

  private async backwardKept(t: Task): Promise<TensorPayload[]> {
    const x = this.take(this.saved, t.mb, 'forward input');
    const last = isLossStage(this.stage, t.chunk, this.shape);
    const dy = last ? tf.scalar(1) : this.take(this.grads, t.mb, 'output gradient');
    const k = this.kept.get(key(t.mb));
    if (!k) throw new TrainingComputeError(`stage ${this.stage}: no kept forward for microbatch ${t.mb}`);
    this.kept.delete(key(t.mb));
    const wb = await this.weights('backward', t.mb);
    let grads: tf.Tensor[];
    try {
      attachWeights(k.detached, wb);
      grads = backwardFromTape(k.detached.forward, this.module.isFirst ? k.weights : [x, ...k.weights], dy);
    } finally {
      tf.dispose([...wb, x, dy]);
    }
    const gradInput = this.module.isFirst ? null : grads[0];
    const paramGrads = this.module.isFirst ? grads : grads.slice(1);
    const named = new Map(paramGrads.map((g, i) => [this.names[i], readFloat32(g)]));
    tf.dispose(paramGrads);
    this.runtime.send(this.store, { type: 'backward-ran', mb: t.mb, grads: named });
    const out = gradInput ? [toPayload(gradInput)] : [];
    gradInput?.dispose();
    return out;
  }

  private take(map: Map<string, tf.Tensor>, mb: number, what: string): tf.Tensor {
    const x = map.get(key(mb));
    if (!x) throw new TrainingComputeError(`stage ${this.stage}: no ${what} for microbatch ${mb}`);
    map.delete(key(mb));
    return x;
  }

  private async backward(iteration: number, t: Task): Promise<TensorPayload[]> {
    if (this.backwardMode === 'kept') return this.backwardKept(t);
    const x = this.take(this.saved, t.mb, 'forward input');
    const last = isLossStage(this.stage, t.chunk, this.shape);
    const dy = last ? null : this.take(this.grads, t.mb, 'output gradient');
    const b = last ? batchFor(this.train, this.corpus, 'train', iteration, this.firstMicrobatch + t.mb) : null;
    const targets = b ? tf.tensor(b.targets, [...b.targetShape], 'int32') : undefined;
    const w = await this.weights('backward', t.mb);
    const res = this.module.backward(x, dy, { targets, lossScale: 1, params: w });
    tf.dispose([w, x, ...(dy ? [dy] : []), ...(targets ? [targets] : [])]);
    if (res.loss !== undefined) this.losses[t.mb] = res.loss;
    const grads = new Map(res.paramGrads.map((g, i) => [this.names[i], readFloat32(g)]));
    tf.dispose(res.paramGrads);
    this.runtime.send(this.store, { type: 'backward-ran', mb: t.mb, grads });
    const out = res.gradInput ? [toPayload(res.gradInput)] : [];
    res.gradInput?.dispose();
    return out;
  }

  async endIteration(): Promise<Record<string, unknown>> {
    const stats = await storeStats(this.runtime, this.store);
    const params = await this.runtime.ask<StoreMsg, ParamMapF>(
      this.store,
      (reply) => ({ type: 'params', reply }),
      60000,
    );
    const body: Record<string, unknown> = {
      store: stats,
      snapshot: { params: Object.fromEntries(params), optimizer: [] },
    };
    if (this.losses.length > 0) body.losses = this.losses;
    return body;
  }

  /** The store's last snapshot, waited for up to LAST_SNAPSHOT_MS (the only bound on the abort's wait for it). */
  private async lastSnapshot(): Promise<void> {
    await this.runtime.ask<StoreMsg, void>(
      this.store,
      (reply) => ({ type: 'snapshot', reply: () => reply() }),
      LAST_SNAPSHOT_MS,
    );
  }

  dispose(): void {
    for (const m of [this.received, this.grads, this.saved]) for (const t of m.values()) t.dispose();
    for (const k of this.kept.values()) this.module.releaseKept(k.detached.forward);
    this.module.dispose();
  }
}
