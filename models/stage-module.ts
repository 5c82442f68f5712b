// The seam between Baton's runtime and compute: a stage module holds a contiguous range
// of a model's layers and runs forward and backward on tensors. It knows nothing of
// pipelines, microbatches or messages; the caller passes everything it needs.
//
// A model is described as layer specs (embedding, blocks, head) so that the partitioner
// can cut it anywhere between layers; see partition.ts and sequential-stage.ts.

import * as tf from '@tensorflow/tfjs';
import type { InitKind } from './seeded-init';
import type { DeferredWeightGrads, KeptForward } from './kept-tape';

/** One parameter tensor of a layer. Names are stable across partitions, e.g. `gpt.h1.attn.wq`. */
export interface ParamSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly init: InitKind;
}

/** A unit the partitioner never splits: the embedding, one block, or the head. */
export interface LayerSpec {
  readonly name: string;
  readonly kind: 'embed' | 'block' | 'head';
  readonly params: readonly ParamSpec[];
  /** Forward FLOPs for one sample (one sequence or window); backward is about twice this. */
  readonly flopsPerSample: number;
  /** Pure function of (this layer's params in `params` order, input) → output. */
  apply(params: readonly tf.Tensor[], x: tf.Tensor): tf.Tensor;
}

export interface ModelSpec {
  /** Short model name used in stage names, e.g. "gpt". */
  readonly name: string;
  /** Seed of the deterministic initialisation. */
  readonly seed: number;
  readonly embed: LayerSpec;
  readonly blocks: readonly LayerSpec[];
  readonly head: LayerSpec;
  /** Scalar mean loss of the head's output against int32 targets. */
  loss(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar;
  /** Shape of what flows between layers (and so between stages, both ways) for `batch` samples of `seq` tokens. */
  hiddenShape(batch: number, seq: number): number[];
}

export interface BackwardOptions {
  /** Last stage: int32 targets matching the logits' leading axes. */
  readonly targets?: tf.Tensor;
  /**
   * Last stage: gradients are of `lossScale × loss` (e.g. 1/M to average M microbatches).
   * Required on the last stage so averaging is never implicit.
   */
  readonly lossScale?: number;
  /** Weights to differentiate at instead of the current variables (weight stashing, prediction). */
  readonly params?: readonly tf.Tensor[];
  /**
   * The kept forward of this microbatch (forwardKeepingActivations): backward uses its
   * tape instead of recomputing the forward, then frees it. Not with `params`; not on
   * the last stage.
   */
  readonly kept?: KeptForward;
}

export interface BackwardResult {
  /** Gradient with respect to the stage's input; null on the first stage. */
  readonly gradInput: tf.Tensor | null;
  /** One per params() entry, same order. */
  readonly paramGrads: tf.Tensor[];
  /** Last stage only: the unscaled mean loss of this microbatch. */
  readonly loss?: number;
}

export interface SplitBackwardOptions {
  /** Non-last stages: the forward kept by forwardKeepingActivations (used up). */
  readonly kept?: KeptForward;
  /** Last stage: as in BackwardOptions. */
  readonly targets?: tf.Tensor;
  readonly lossScale?: number;
}

export interface SplitBackwardResult {
  /** Null on the first stage. */
  readonly gradInput: tf.Tensor | null;
  /** What W needs: pass it to backwardWeights or releaseDeferred. */
  readonly deferred: DeferredWeightGrads;
  /** Last stage only: the unscaled mean loss of this microbatch. */
  readonly loss?: number;
}

export interface StageModule {
  /** e.g. "gpt[h2..h3]" or "gpt[embed, h0..h1]". */
  readonly name: string;
  readonly isFirst: boolean;
  readonly isLast: boolean;
  /** Variables in a fixed order. */
  params(): tf.Variable[];
  /** Stable names, same order as params(). */
  paramNames(): string[];
  /** Forward FLOPs of one sample through this stage (estimate). */
  readonly flopsPerSample: number;
  /**
   * First stage: int32 ids (B, T) or windows (B, W); others float activations.
   * The last stage returns logits. The caller owns (and disposes) the result.
   */
  forward(input: tf.Tensor, params?: readonly tf.Tensor[]): tf.Tensor;
  /** Last stage only: the scalar mean cross-entropy. */
  loss(input: tf.Tensor, targets: tf.Tensor, params?: readonly tf.Tensor[]): tf.Scalar;
  /**
   * forward() that keeps the activations its backward needs (the autodiff tape) until
   * backward({ kept }) or releaseKept(). Not on the last stage, whose backward runs
   * forward and backward together anyway. The caller owns `kept.output`.
   */
  forwardKeepingActivations(input: tf.Tensor): KeptForward;
  /** Frees a kept forward whose backward will not run. */
  releaseKept(kept: KeptForward): void;
  /** forward() at `params` keeping the tape, through the loss on the last stage (targets needed there). */
  forwardKeepingTapeAt?(input: tf.Tensor, params: readonly tf.Tensor[], targets?: tf.Tensor): KeptForward;
  /**
   * B of a split backward without recomputing the forward: the input gradient only,
   * from the kept forward (non-last stages); the last stage runs its forward with the
   * loss here, keeping the tape (it needs targets and lossScale). The weight gradients
   * are deferred to backwardWeights (W). Keep `input` and `gradOutput` alive until then.
   */
  backwardInput(input: tf.Tensor, gradOutput: tf.Tensor | null, opts: SplitBackwardOptions): SplitBackwardResult;
  /** W of a split backward: one gradient per params() entry. The caller owns them. */
  backwardWeights(deferred: DeferredWeightGrads): tf.Tensor[];
  /** Frees the deferred half of a split backward that will not run. */
  releaseDeferred(deferred: DeferredWeightGrads): void;
  /**
   * Recomputes the forward pass (or uses opts.kept) and returns gradients. Non-last stages need gradOutput
   * (same shape as forward's output); the last stage needs targets and lossScale.
   */
  backward(input: tf.Tensor, gradOutput: tf.Tensor | null, opts?: BackwardOptions): BackwardResult;
  /** Disposes the variables. */
  dispose(): void;
}

export class StageUsageError extends Error {
  override name = 'StageUsageError';
  constructor(stage: string, message: string) {
    super(`${stage}: ${message}`);
  }
}
