// One tensor-parallel rank's share of a stage: the TP steps of its layers (tp-layers.ts),
// their rank-local variables, and a forward and backward that stop at every collective.
// The forward all-reduces each parallel step's partial output (the row-parallel matrices'
// sum); the backward all-reduces the gradient of each column-parallel matrix's input (the
// LayerNorm's output), then carries it through the replicated LayerNorm. Between the
// collectives each segment is differentiated on its own (tf.grads on the segment, from the
// input the forward saved), so the chain can wait for its peers between segments. The rank
// never learns who its peers are: it is handed an AllReduce.
//
// Not modelled: keeping the segments' tapes (each segment's forward runs again in the
// backward, about a third more compute), a split backward's separate weight half (B
// computes the weight gradients too).

import * as tf from '@tensorflow/tfjs';
import type { AllReduce } from '../all-reduce';
import type { PartitionPlan } from '../partition';
import { PartitionError } from '../partition';
import { StageUsageError } from '../stage-module';
import { readFloat32 } from '../tensor-io';
import { checkWasmHeap, DEFAULT_WASM_HEAP_LIMIT } from '../tfjs-fixes';
import { ShardedParam, localShape, shardInit } from './sharded-param';
import { ParallelStep, TpModel, TpStep, stepParams } from './tp-layers';

/** A forward's saved inputs, for its backward. */
export interface TpKept {
  /** inputs[k]: step k's input; inputs[0] is the caller's and not freed here. */
  readonly inputs: tf.Tensor[];
  /** Parallel steps: the LayerNorm's output (the core's input), by step index. */
  readonly normed: Map<number, tf.Tensor>;
}

export interface TpBackwardResult {
  readonly gradInput: tf.Tensor | null;
  /** One per params() entry, same order. The caller owns them. */
  readonly paramGrads: tf.Tensor[];
  readonly loss?: number;
}

export class TpStage {
  private readonly variables: tf.Variable[];
  private readonly shards: ShardedParam[];
  /** offsets[k]: index of step k's first variable. */
  private readonly offsets: number[] = [];

  constructor(
    readonly name: string,
    private readonly model: TpModel,
    private readonly steps: readonly TpStep[],
    readonly isFirst: boolean,
    readonly isLast: boolean,
    readonly rank: number,
  ) {
    if (steps.length === 0) throw new StageUsageError(name, 'a stage needs at least one layer');
    const T = model.ranks;
    if (!Number.isInteger(rank) || rank < 0 || rank >= T)
      throw new StageUsageError(name, `rank ${rank} is outside 0..${T - 1}`);
    this.shards = [];
    for (const s of steps) {
      this.offsets.push(this.shards.length);
      this.shards.push(...stepParams(s));
    }
    this.variables = this.shards.map((p) => {
      const t = tf.tensor(shardInit(model.spec.seed, p, rank, T), localShape(p, T), 'float32');
      try {
        return tf.variable(t, true);
      } finally {
        t.dispose();
      }
    });
  }

  params(): tf.Variable[] {
    return [...this.variables];
  }

  paramNames(): string[] {
    return this.shards.map((p) => p.name);
  }

  /** How each params() entry is sliced from its full tensor, same order. */
  shardSpecs(): readonly ShardedParam[] {
    return this.shards;
  }

  private stepVars(k: number): tf.Variable[] {
    return this.variables.slice(this.offsets[k], this.offsets[k] + stepParams(this.steps[k]!).length);
  }

  /**
   * Runs the stage's steps on `input`, all-reducing under keys `${key}/<step>/fwd`. On the
   * last stage the head's output is not computed (its backward runs it with the loss).
   */
  async forward(
    input: tf.Tensor,
    allReduce: AllReduce,
    key: string,
  ): Promise<{ output: tf.Tensor | null; kept: TpKept }> {
    const kept: TpKept = { inputs: [input], normed: new Map() };
    try {
      let x = input;
      for (let k = 0; k < this.steps.length; k++) {
        const step = this.steps[k]!;
        const w = this.stepVars(k);
        if (step.kind === 'local') {
          if (this.isLast && k === this.steps.length - 1) return { output: null, kept };
          x = tf.tidy(() => step.apply(w, x));
        } else {
          x = await this.parallelForward(step, k, w, x, kept, allReduce, `${key}/${step.name}/fwd`);
        }
        if (k < this.steps.length - 1) kept.inputs.push(x);
      }
      checkWasmHeap(DEFAULT_WASM_HEAP_LIMIT, `${this.name} forward`);
      return { output: x, kept };
    } catch (err) {
      this.release(kept);
      throw err;
    }
  }

  private async parallelForward(
    step: ParallelStep,
    k: number,
    w: readonly tf.Tensor[],
    t: tf.Tensor,
    kept: TpKept,
    allReduce: AllReduce,
    key: string,
  ): Promise<tf.Tensor> {
    const nNorm = step.norm.length;
    const nCore = step.core.length;
    const h = tf.tidy(() => step.normApply(w.slice(0, nNorm), t));
    kept.normed.set(k, h);
    const partial = tf.tidy(() => step.coreApply(w.slice(nNorm, nNorm + nCore), h));
    const shape = partial.shape;
    const data = readFloat32(partial);
    partial.dispose();
    const sum = await allReduce(key, data);
    const bias = w[nNorm + nCore]!;
    return tf.tidy(() => t.add(tf.tensor(sum, shape, 'float32').add(bias)));
  }

  /**
   * Gradients from a forward's kept inputs: of `sum(gradOutput · output)`, or on the last
   * stage of `lossScale × loss(head(x), targets)`; all-reduces under `${key}/<step>/bwd`.
   * Frees what the forward kept (not the caller's input, gradOutput or targets).
   */
  async backward(
    kept: TpKept,
    gradOutput: tf.Tensor | null,
    allReduce: AllReduce,
    key: string,
    last?: { targets: tf.Tensor; lossScale: number },
  ): Promise<TpBackwardResult> {
    if (this.isLast !== (last !== undefined))
      throw new StageUsageError(
        this.name,
        this.isLast ? 'the last stage needs targets' : 'only the last stage takes targets',
      );
    if (!this.isLast && !gradOutput)
      throw new StageUsageError(this.name, 'backward needs the gradient of the stage output');
    const grads: tf.Tensor[][] = new Array(this.steps.length);
    let dy: tf.Tensor | null = gradOutput;
    let loss: number | undefined;
    try {
      for (let k = this.steps.length - 1; k >= 0; k--) {
        const step = this.steps[k]!;
        const x = kept.inputs[k]!;
        const w = this.stepVars(k);
        const wantInput = !(this.isFirst && k === 0);
        let r: { dx: tf.Tensor | null; dw: tf.Tensor[]; loss?: number };
        if (step.kind === 'local')
          r = this.localBackward(step.apply, x, w, dy, wantInput, k === this.steps.length - 1 ? last : undefined);
        else
          r = await this.parallelBackward(step, x, kept.normed.get(k)!, w, dy!, allReduce, `${key}/${step.name}/bwd`);
        if (dy && dy !== gradOutput) dy.dispose();
        dy = r.dx;
        grads[k] = r.dw;
        if (r.loss !== undefined) loss = r.loss;
      }
      checkWasmHeap(DEFAULT_WASM_HEAP_LIMIT, `${this.name} backward`);
      const paramGrads = grads.flat();
      return loss === undefined ? { gradInput: dy, paramGrads } : { gradInput: dy, paramGrads, loss };
    } catch (err) {
      if (dy && dy !== gradOutput) dy.dispose();
      for (const g of grads) if (g) tf.dispose(g);
      throw err;
    } finally {
      this.release(kept);
    }
  }

  private localBackward(
    apply: (p: readonly tf.Tensor[], x: tf.Tensor) => tf.Tensor,
    x: tf.Tensor,
    w: readonly tf.Tensor[],
    dy: tf.Tensor | null,
    wantInput: boolean,
    last: { targets: tf.Tensor; lossScale: number } | undefined,
  ): { dx: tf.Tensor | null; dw: tf.Tensor[]; loss?: number } {
    const f = (...a: tf.Tensor[]) => {
      const y = wantInput ? apply(a.slice(1), a[0]!) : apply(a, x);
      return last ? this.model.spec.loss(y, last.targets) : y;
    };
    const seed = last ? tf.scalar(last.lossScale) : dy!;
    try {
      const { value, grads } = tf.valueAndGrads(f)(wantInput ? [x, ...w] : [...w], seed);
      const loss = last ? value.dataSync()[0] : undefined;
      value.dispose();
      return { dx: wantInput ? grads[0]! : null, dw: wantInput ? grads.slice(1) : grads, loss };
    } finally {
      if (last) seed.dispose();
    }
  }

  /** dt = dy + normᵀ(Σ_ranks coreᵀ(dy)); the bias gets Σ dy (it was added once, after the all-reduce). */
  private async parallelBackward(
    step: ParallelStep,
    t: tf.Tensor,
    h: tf.Tensor,
    w: readonly tf.Tensor[],
    dy: tf.Tensor,
    allReduce: AllReduce,
    key: string,
  ): Promise<{ dx: tf.Tensor; dw: tf.Tensor[] }> {
    const nNorm = step.norm.length;
    const coreW = w.slice(nNorm, nNorm + step.core.length);
    const width = dy.shape[dy.shape.length - 1]!;
    const dBias = tf.tidy(() => dy.reshape([-1, width]).sum(0));
    const [dhPartial, ...dCore] = tf.grads((hh: tf.Tensor, ...cw: tf.Tensor[]) => step.coreApply(cw, hh))(
      [h, ...coreW],
      dy,
    );
    let dNorm: tf.Tensor[];
    let dx: tf.Tensor;
    try {
      const data = readFloat32(dhPartial!);
      const sum = await allReduce(key, data);
      [dx, ...dNorm] = tf.tidy(() => {
        const dh = tf.tensor(sum, h.shape, 'float32');
        const [dt, ...dn] = tf.grads((tt: tf.Tensor, ...nw: tf.Tensor[]) => step.normApply(nw, tt))(
          [t, ...w.slice(0, nNorm)],
          dh,
        );
        return [dy.add(dt!), ...dn];
      });
    } catch (err) {
      tf.dispose([dBias, ...dCore]);
      throw err;
    } finally {
      dhPartial!.dispose();
    }
    return { dx: dx!, dw: [...dNorm!, ...dCore, dBias] };
  }

  /** Frees what a forward kept, when its backward will not run (or has). */
  release(kept: TpKept): void {
    for (const t of kept.inputs.slice(1)) t.dispose();
    kept.inputs.length = 1;
    for (const h of kept.normed.values()) h.dispose();
    kept.normed.clear();
  }

  dispose(): void {
    for (const v of this.variables) v.dispose();
  }
}

/** The TP steps of virtual stage `v` of a plan of `model.spec`, for `rank` (allocates only its variables). */
export function buildTpStage(model: TpModel, plan: PartitionPlan, v: number, rank: number): TpStage {
  const vs = plan.virtual[v];
  if (!vs) throw new PartitionError(`partition of ${model.spec.name}: no virtual stage ${v}`);
  const steps = [
    ...(vs.hasEmbed ? model.embed : []),
    ...model.blocks.slice(vs.blockStart, vs.blockEnd).flat(),
    ...(vs.hasHead ? model.head : []),
  ];
  const name = `${model.spec.name}[${vs.layers.join(', ')}] tp${rank}/${model.ranks}`;
  return new TpStage(name, model, steps, vs.hasEmbed, vs.hasHead, rank);
}
