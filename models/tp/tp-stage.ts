// One tensor-parallel rank's share of a stage: the TP steps of its layers (tp-layers.ts),
// their rank-local variables, and a forward and backward that stop at every collective.
// The forward all-reduces each parallel step's partial output (the row-parallel matrices'
// sum); the backward all-reduces the gradient of each column-parallel matrix's input (the
// LayerNorm's output), then carries it through the replicated LayerNorm. Between the
// collectives each segment (a LayerNorm, a core, an embedding or head) keeps its own autodiff
// tape (kept-tape.ts) and is differentiated on its own, so the chain can wait for its peers
// between segments and the backward recomputes nothing. The rank never learns who its peers
// are: it is handed an AllReduce.
//
// Not modelled: a split backward's separate weight half (B computes the weight gradients too).

import * as tf from '@tensorflow/tfjs';
import type { AllReduce } from '../all-reduce';
import type { PartitionPlan } from '../partition';
import { PartitionError } from '../partition';
import { StageUsageError } from '../stage-module';
import { readFloat32 } from '../tensor-io';
import { checkWasmHeap, DEFAULT_WASM_HEAP_LIMIT } from '../tfjs-fixes';
import { ShardedParam, localShape, shardInit } from './sharded-param';
import { trainableVariable } from '../trainable-variable';
import { ParallelStep, TpModel, TpStep, stepParams } from './tp-layers';
import { KeptForward, backwardFromTape, forwardKeepingTape, releaseTape } from '../kept-tape';

/** A forward's saved inputs, for its backward. */
export interface TpKept {
  /** inputs[k]: step k's input; inputs[0] is the caller's and not freed here. */
  readonly inputs: tf.Tensor[];
  /** Parallel steps: the LayerNorm's output (the core's input), by step index. */
  readonly normed: Map<number, tf.Tensor>;
  /** Each segment's tape: `k` for a local step, `k.norm` and `k.core` for a parallel one. */
  readonly tapes: Map<string, KeptForward>;
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
    this.variables = this.shards.map((p) =>
      trainableVariable(shardInit(model.spec.seed, p, rank, T), localShape(p, T)),
    );
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
    const kept: TpKept = { inputs: [input], normed: new Map(), tapes: new Map() };
    try {
      let x = input;
      for (let k = 0; k < this.steps.length; k++) {
        const step = this.steps[k]!;
        const w = this.stepVars(k);
        if (step.kind === 'local') {
          if (this.isLast && k === this.steps.length - 1) return { output: null, kept };
          const tape = forwardKeepingTape(() => step.apply(w, x));
          kept.tapes.set(`${k}`, tape);
          x = tape.output;
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
    const normTape = forwardKeepingTape(() => step.normApply(w.slice(0, nNorm), t));
    kept.tapes.set(`${k}.norm`, normTape);
    const h = normTape.output;
    kept.normed.set(k, h);
    const coreTape = forwardKeepingTape(() => step.coreApply(w.slice(nNorm, nNorm + nCore), h));
    kept.tapes.set(`${k}.core`, coreTape);
    const partial = coreTape.output;
    const shape = partial.shape;
    const data = readFloat32(partial);
    partial.dispose();
    const sum = await allReduce(key, data);
    const bias = w[nNorm + nCore]!;
    return tf.tidy(() => t.add(tf.tensor(sum, shape, 'float32').add(bias)));
  }

  /**
   * Gradients from what a forward kept (inputs and tapes): of `sum(gradOutput · output)`, or on the last
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
        if (step.kind === 'parallel')
          r = await this.parallelBackward(step, k, x, kept, w, dy!, allReduce, `${key}/${step.name}/bwd`);
        else if (this.isLast && k === this.steps.length - 1) r = this.lossBackward(step.apply, x, w, wantInput, last!);
        else {
          const g = backwardFromTape(this.tape(kept, `${k}`), wantInput ? [x, ...w] : w, dy!);
          r = { dx: wantInput ? g[0]! : null, dw: wantInput ? g.slice(1) : g };
        }
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

  private tape(kept: TpKept, name: string): KeptForward {
    const t = kept.tapes.get(name);
    if (!t) throw new StageUsageError(this.name, `no kept tape for segment ${name}`);
    kept.tapes.delete(name);
    return t;
  }

  /** The head with the loss, run forward and backward together (the loss stage's B, as in TP = 1). */
  private lossBackward(
    apply: (p: readonly tf.Tensor[], x: tf.Tensor) => tf.Tensor,
    x: tf.Tensor,
    w: readonly tf.Tensor[],
    wantInput: boolean,
    last: { targets: tf.Tensor; lossScale: number },
  ): { dx: tf.Tensor | null; dw: tf.Tensor[]; loss: number } {
    const f = (...a: tf.Tensor[]) =>
      this.model.spec.loss(wantInput ? apply(a.slice(1), a[0]!) : apply(a, x), last.targets);
    const seed = tf.scalar(last.lossScale);
    try {
      const { value, grads } = tf.valueAndGrads(f)(wantInput ? [x, ...w] : [...w], seed);
      const loss = value.dataSync()[0]!;
      value.dispose();
      return { dx: wantInput ? grads[0]! : null, dw: wantInput ? grads.slice(1) : grads, loss };
    } finally {
      seed.dispose();
    }
  }

  /** dt = dy + normᵀ(Σ_ranks coreᵀ(dy)); the bias gets Σ dy (it was added once, after the all-reduce). */
  private async parallelBackward(
    step: ParallelStep,
    k: number,
    t: tf.Tensor,
    kept: TpKept,
    w: readonly tf.Tensor[],
    dy: tf.Tensor,
    allReduce: AllReduce,
    key: string,
  ): Promise<{ dx: tf.Tensor; dw: tf.Tensor[] }> {
    const nNorm = step.norm.length;
    const coreW = w.slice(nNorm, nNorm + step.core.length);
    const width = dy.shape[dy.shape.length - 1]!;
    const dBias = tf.tidy(() => dy.reshape([-1, width]).sum(0));
    const h = kept.normed.get(k)!;
    const [dhPartial, ...dCore] = backwardFromTape(this.tape(kept, `${k}.core`), [h, ...coreW], dy);
    const normTape = this.tape(kept, `${k}.norm`);
    let dNorm: tf.Tensor[];
    let dx: tf.Tensor;
    try {
      const data = readFloat32(dhPartial!);
      const sum = await allReduce(key, data);
      [dx, ...dNorm] = tf.tidy(() => {
        const dh = tf.tensor(sum, h.shape, 'float32');
        const [dt, ...dn] = backwardFromTape(normTape, [t, ...w.slice(0, nNorm)], dh);
        return [dy.add(dt!), ...dn];
      });
    } catch (err) {
      tf.dispose([dBias, ...dCore]);
      throw err;
    } finally {
      dhPartial!.dispose();
      releaseTape(normTape);
    }
    return { dx: dx!, dw: [...dNorm!, ...dCore, dBias] };
  }

  /** Frees what a forward kept, when its backward will not run (or has). */
  release(kept: TpKept): void {
    for (const t of kept.inputs.slice(1)) t.dispose();
    kept.inputs.length = 1;
    for (const h of kept.normed.values()) h.dispose();
    kept.normed.clear();
    for (const t of kept.tapes.values()) releaseTape(t);
    kept.tapes.clear();
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
