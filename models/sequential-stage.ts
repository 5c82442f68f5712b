// A stage module made of consecutive layer specs of a model: it owns their variables
// (initialised from the model seed and each parameter's name), runs them in order, and
// gets gradients either by recomputing its forward pass inside tf.grads with an explicit
// dy (activation checkpointing: needed when the backward's weights differ from the
// forward's), or from the tape its forward kept (forwardKeepingActivations,
// kept-tape.ts), which costs memory and saves a forward; a split B/W backward
// (backwardInput, backwardWeights) works from the kept tape too.

import * as tf from '@tensorflow/tfjs';
import { initValues } from './seeded-init';
import { trainableVariable } from './trainable-variable';
import {
  DeferredWeightGrads,
  KeptForward,
  backwardFromTape,
  backwardInputFromTape,
  forwardKeepingTape,
  releaseDeferred,
  releaseTape,
  weightGradsFromDeferred,
} from './kept-tape';
import { checkWasmHeap, DEFAULT_WASM_HEAP_LIMIT } from './tfjs-fixes';
import {
  BackwardOptions,
  BackwardResult,
  LayerSpec,
  ModelSpec,
  SplitBackwardOptions,
  SplitBackwardResult,
  StageModule,
  StageUsageError,
} from './stage-module';

export interface SequentialStageOptions {
  /** Live-tensor bytes above which a wasm stage throws WasmHeapError after a task. */
  readonly heapLimitBytes?: number;
}

export class SequentialStage implements StageModule {
  readonly flopsPerSample: number;
  private readonly variables: tf.Variable[];
  private readonly names: string[];
  private readonly heapLimit: number;

  constructor(
    readonly name: string,
    private readonly model: ModelSpec,
    private readonly layers: readonly LayerSpec[],
    readonly isFirst: boolean,
    readonly isLast: boolean,
    opts: SequentialStageOptions = {},
  ) {
    if (layers.length === 0) throw new StageUsageError(name, 'a stage needs at least one layer');
    this.heapLimit = opts.heapLimitBytes ?? DEFAULT_WASM_HEAP_LIMIT;
    this.flopsPerSample = layers.reduce((s, l) => s + l.flopsPerSample, 0);
    this.names = layers.flatMap((l) => l.params.map((p) => p.name));
    this.variables = layers.flatMap((l) =>
      l.params.map((p) => {
        const size = p.shape.reduce((a, b) => a * b, 1);
        return trainableVariable(initValues(model.seed, p.name, size, p.init), p.shape);
      }),
    );
  }

  params(): tf.Variable[] {
    return [...this.variables];
  }

  paramNames(): string[] {
    return [...this.names];
  }

  private weights(params: readonly tf.Tensor[] | undefined): readonly tf.Tensor[] {
    if (!params) return this.variables;
    if (params.length !== this.variables.length) {
      throw new StageUsageError(
        this.name,
        `got ${params.length} weight tensors, the stage has ${this.variables.length} (${this.names.join(', ')})`,
      );
    }
    params.forEach((p, i) => {
      const want = this.variables[i]!.shape;
      if (p.shape.length !== want.length || p.shape.some((d, k) => d !== want[k])) {
        throw new StageUsageError(this.name, `weight ${this.names[i]} has shape [${p.shape}], expected [${want}]`);
      }
    });
    return params;
  }

  private run(weights: readonly tf.Tensor[], input: tf.Tensor): tf.Tensor {
    let x = input;
    let offset = 0;
    for (const layer of this.layers) {
      const n = layer.params.length;
      x = layer.apply(weights.slice(offset, offset + n), x);
      offset += n;
    }
    return x;
  }

  private checkInput(input: tf.Tensor): void {
    const want = this.isFirst ? 'int32' : 'float32';
    if (input.dtype !== want)
      throw new StageUsageError(this.name, `input dtype is ${input.dtype}, expected ${want} (shape [${input.shape}])`);
  }

  forward(input: tf.Tensor, params?: readonly tf.Tensor[]): tf.Tensor {
    this.checkInput(input);
    const w = this.weights(params);
    const out = tf.tidy(() => this.run(w, input));
    checkWasmHeap(this.heapLimit, `${this.name} forward`);
    return out;
  }

  forwardKeepingActivations(input: tf.Tensor): KeptForward {
    if (this.isLast)
      throw new StageUsageError(
        this.name,
        'the last stage runs forward and backward together; it keeps no activations',
      );
    this.checkInput(input);
    const kept = forwardKeepingTape(() => this.run(this.variables, input));
    checkWasmHeap(this.heapLimit, `${this.name} forward`);
    return kept;
  }

  /**
   * The forward at `params`, keeping its tape; on the last stage it runs on to the loss
   * (needs targets), so the tape's output is the scalar loss. For asynchronous training,
   * whose backward runs at other weights (kept-weights.ts).
   */
  forwardKeepingTapeAt(input: tf.Tensor, params: readonly tf.Tensor[], targets?: tf.Tensor): KeptForward {
    this.checkInput(input);
    const w = this.weights(params);
    if (this.isLast && !targets) throw new StageUsageError(this.name, 'a kept forward on the last stage needs targets');
    const kept = forwardKeepingTape(() =>
      this.isLast ? this.model.loss(this.run(w, input), targets!) : this.run(w, input),
    );
    checkWasmHeap(this.heapLimit, `${this.name} forward`);
    return kept;
  }

  releaseKept(kept: KeptForward): void {
    releaseTape(kept);
  }

  private backwardFromKept(input: tf.Tensor, gradOutput: tf.Tensor | null, opts: BackwardOptions): BackwardResult {
    const kept = opts.kept!;
    if (opts.params) {
      releaseTape(kept);
      throw new StageUsageError(
        this.name,
        "a kept forward serves one backward at the forward's own weights (no params)",
      );
    }
    if (!gradOutput) {
      releaseTape(kept);
      throw new StageUsageError(this.name, 'backward needs the gradient of the stage output');
    }
    const wantInput = !this.isFirst;
    const xs = wantInput ? [input, ...this.variables] : [...this.variables];
    const grads = backwardFromTape(kept, xs, gradOutput);
    checkWasmHeap(this.heapLimit, `${this.name} backward`);
    return { gradInput: wantInput ? grads[0] : null, paramGrads: wantInput ? grads.slice(1) : grads };
  }

  backwardInput(input: tf.Tensor, gradOutput: tf.Tensor | null, opts: SplitBackwardOptions): SplitBackwardResult {
    this.checkInput(input);
    if (!this.isLast) {
      if (!opts.kept) throw new StageUsageError(this.name, 'a split backward without recompute needs the kept forward');
      if (!gradOutput) {
        releaseTape(opts.kept);
        throw new StageUsageError(this.name, 'backward needs the gradient of the stage output');
      }
      const r = backwardInputFromTape(opts.kept, this.isFirst ? null : input, this.variables, gradOutput);
      checkWasmHeap(this.heapLimit, `${this.name} backward (input)`);
      return r;
    }
    const { targets, lossScale } = this.lossOptions(opts);
    const kept = forwardKeepingTape(() => this.model.loss(this.run(this.variables, input), targets));
    const loss = kept.output.dataSync()[0]!;
    kept.output.dispose();
    const dy = tf.scalar(lossScale);
    let r: { gradInput: tf.Tensor | null; deferred: DeferredWeightGrads };
    try {
      r = backwardInputFromTape(kept, this.isFirst ? null : input, this.variables, dy);
    } catch (err) {
      dy.dispose();
      throw err;
    }
    // The weight half may read dy; it is freed with the deferred half.
    r.deferred.owned.push(dy);
    checkWasmHeap(this.heapLimit, `${this.name} backward (input)`);
    return { ...r, loss };
  }

  /** The last stage's backward needs targets and a finite positive lossScale. */
  private lossOptions(opts: { targets?: tf.Tensor; lossScale?: number }): { targets: tf.Tensor; lossScale: number } {
    const { targets, lossScale } = opts;
    if (!targets) throw new StageUsageError(this.name, 'backward on the last stage needs targets');
    if (lossScale === undefined || !Number.isFinite(lossScale) || lossScale <= 0) {
      throw new StageUsageError(
        this.name,
        `backward on the last stage needs a finite positive lossScale, got ${lossScale}`,
      );
    }
    return { targets, lossScale };
  }

  backwardWeights(deferred: DeferredWeightGrads): tf.Tensor[] {
    const grads = weightGradsFromDeferred(deferred);
    checkWasmHeap(this.heapLimit, `${this.name} backward (weights)`);
    return grads;
  }

  releaseDeferred(deferred: DeferredWeightGrads): void {
    releaseDeferred(deferred);
  }

  loss(input: tf.Tensor, targets: tf.Tensor, params?: readonly tf.Tensor[]): tf.Scalar {
    if (!this.isLast) throw new StageUsageError(this.name, 'loss() is only defined on the last stage');
    this.checkInput(input);
    const w = this.weights(params);
    return tf.tidy(() => this.model.loss(this.run(w, input), targets));
  }

  backward(input: tf.Tensor, gradOutput: tf.Tensor | null, opts: BackwardOptions = {}): BackwardResult {
    this.checkInput(input);
    if (opts.kept) return this.backwardFromKept(input, gradOutput, opts);
    const w = this.weights(opts.params);
    const wantInput = !this.isFirst;

    let dy: tf.Tensor;
    let objective: (out: tf.Tensor) => tf.Tensor;
    if (this.isLast) {
      const { targets, lossScale } = this.lossOptions(opts);
      objective = (logits) => this.model.loss(logits, targets);
      dy = tf.scalar(lossScale);
    } else {
      if (!gradOutput) throw new StageUsageError(this.name, 'backward needs the gradient of the stage output');
      objective = (out) => out;
      dy = gradOutput;
    }

    const xs: tf.Tensor[] = wantInput ? [input, ...w] : [...w];
    const f = (...args: tf.Tensor[]): tf.Tensor => {
      const x = wantInput ? args[0]! : input;
      return objective(this.run(wantInput ? args.slice(1) : args, x));
    };
    const [value, ...grads] = tf.tidy(() => {
      const { value, grads } = tf.valueAndGrads(f)(xs, dy);
      return [value, ...grads];
    });
    if (this.isLast) dy.dispose();
    let loss: number | undefined;
    if (this.isLast) loss = value!.dataSync()[0]!;
    value!.dispose();
    const gradInput = wantInput ? grads[0]! : null;
    const paramGrads = grads.slice(wantInput ? 1 : 0);
    checkWasmHeap(this.heapLimit, `${this.name} backward`);
    return loss === undefined ? { gradInput, paramGrads } : { gradInput, paramGrads, loss };
  }

  dispose(): void {
    for (const v of this.variables) v.dispose();
  }
}
