// The settings of asynchronous training a stage's parameter store is spawned with, and
// the consistency policy they choose for it (makePolicy); the store's error. The store
// runs the policy (param-store.ts); nothing here holds parameters.

import { NAdamW } from '../policies/optim/nadamw';
import { ConsistencyPolicy } from '../policies/consistency/policy';
import { FrescoPolicy, LinearLayerSpec } from '../policies/consistency/fresco-policy';
import { NoConsistency } from '../policies/consistency/none';
import { PipeMare } from '../policies/consistency/pipemare';
import { WeightPrediction } from '../policies/consistency/predict';
import { WeightStash } from '../policies/consistency/stash';
import { SpecTrain } from '../policies/consistency/spectrain';
import { LinearWeightPrediction } from '../policies/consistency/lwp';
import { ProjectionControl } from '../policies/consistency/projection-control';
import { CapturedLinearInput } from '../models/layers';

/** The methods FRESCO's paper compares, by its names (its appendix A.1). */
export const PAPER_METHODS = ['inconsistent', 'stash', 'recovery', 'spectrain', 'pipeoptim', 'lwp', 'fresco'] as const;
/** The paper's methods and the projection control. */
export const CONSISTENCY_METHODS = [...PAPER_METHODS, 'projection-control'] as const;
export type ConsistencyMethod = (typeof CONSISTENCY_METHODS)[number];
/** Earlier names of the same methods. */
export const CONSISTENCY_ALIASES = {
  none: 'inconsistent',
  pipemare: 'recovery',
  predict: 'pipeoptim',
} as const satisfies Record<string, ConsistencyMethod>;
export const CONSISTENCY_POLICIES = [
  ...CONSISTENCY_METHODS,
  ...(Object.keys(CONSISTENCY_ALIASES) as (keyof typeof CONSISTENCY_ALIASES)[]),
] as const;
export type ConsistencyName = ConsistencyMethod | keyof typeof CONSISTENCY_ALIASES;

/** The method a name (or an alias) stands for. */
export function canonicalConsistency(name: ConsistencyName): ConsistencyMethod {
  return Object.hasOwn(CONSISTENCY_ALIASES, name)
    ? CONSISTENCY_ALIASES[name as keyof typeof CONSISTENCY_ALIASES]
    : (name as ConsistencyMethod);
}

/** How a backward gets the activations of its forward. */
export const BACKWARD_MODES = ['kept', 'recompute'] as const;
export type BackwardMode = (typeof BACKWARD_MODES)[number];

export interface AsyncSettings {
  consistency: ConsistencyName;
  /** FRESCO protection budget α. */
  alpha: number;
  /** Peak learning rate, warmup updates, total updates (cosine to 0.1x after warmup). */
  lr: number;
  warmup: number;
  totalUpdates: number;
  weightDecay: number;
  beta1: number;
  clip: number;
  /**
   * PipeMare's learning-rate damping. Off by default, as in FRESCO's main comparison
   * (its appendix D.3: every method then has the same learning-rate schedule).
   */
  pipemareDamping: boolean;
  /** LRD (or PipeMare's damping): updates over which the damping exponent decays to 0 (K). */
  pipemareSteps: number;
  /**
   * PipeMare's learning-rate damping (LRD) for any method: the lr of a stage with delay τ
   * is η_t·τ^(−p_t), p_t = 1 − min(t/K, 1), K = pipemareSteps. Off by default, as in
   * FRESCO's main comparison.
   */
  lrd: boolean;
  /**
   * 'kept': a backward runs on its forward's activations (the autodiff tape kept from F
   * to B, as in FRESCO's runs), at the weights the policy hands the backward;
   * 'recompute': it recomputes its forward at those weights (activation checkpointing).
   */
  backward: BackwardMode;
  /** projection-control: the depth whose FRESCO τ each layer's projection copies (≥ 1). */
  controlStages: number;
  /** A stage's state is snapshotted for recovery every this many updates (0: never; job/async-recovery.ts). */
  snapshotEvery: number;
  /** The microbatch of the job's stream this launch's microbatch 0 is (0 unless a recovery resumed the stream). */
  firstMicrobatch: number;
}

/** LRD is on for a run: asked for, or the old PipeMare flag with PipeMare's method. */
export function lrdOn(s: AsyncSettings): boolean {
  return s.lrd || (s.pipemareDamping && canonicalConsistency(s.consistency) === 'recovery');
}

/** Methods whose policy needs the layer inputs of the first forward to be made. */
export const NEEDS_LAYERS: readonly ConsistencyMethod[] = ['fresco', 'projection-control'];

/** PipeMare's damping horizon K for a run of `totalUpdates`: FRESCO's D.3 used 15,000 of 20,000. */
export function pipemareHorizon(totalUpdates: number): number {
  return Math.max(1, Math.round(0.75 * totalUpdates));
}

export class ParamStoreError extends Error {
  override name = 'ParamStoreError';
}

function frescoLayers(inputs: readonly CapturedLinearInput[]): LinearLayerSpec[] {
  return inputs.map((c) => ({
    layer: c.weight,
    weight: c.weight,
    bias: c.bias,
    layout: 'in-out' as const,
    dout: c.dout,
    din: c.din,
  }));
}

/**
 * The policy of a stage where at most `inflight` microbatches are in flight (their F ran,
 * their B not yet). An update follows a B, whose microbatch no longer needs protection,
 * so FRESCO protects at most `inflight` − 1 at an update: that is its τ (each microbatch
 * contributes ⌈k/τ⌉ directions, and the τ of them fill the rank budget k). PipeMare
 * damps and prediction looks ahead by `delay` updates. With at most one in flight (the
 * last stage under the default limit, every stage at P = 1), none is in flight at an
 * update: every policy would leave the update and the weights as they are, so none
 * keeps buffers for nothing.
 */
export function makePolicy(
  s: AsyncSettings,
  opt: NAdamW | null,
  inflight: number,
  delay: number,
  inputs?: readonly CapturedLinearInput[],
  controlTaus?: ReadonlyMap<string, number>,
): ConsistencyPolicy {
  const method = canonicalConsistency(s.consistency);
  // The control projects against finished microbatches, so it acts with none in flight.
  if (method === 'projection-control') {
    const layers = frescoLayers(inputs ?? []);
    const tau = new Map(layers.map((l) => [l.layer, controlTaus?.get(l.weight) ?? 0]));
    return new ProjectionControl({ layers, tau, alpha: s.alpha });
  }
  if (inflight <= 1) return new NoConsistency();
  switch (method) {
    case 'inconsistent':
      return new NoConsistency();
    case 'stash':
      return new WeightStash();
    case 'recovery':
      // LRD, when on, is the store's (lrdOn): the policy only reconstructs.
      return new PipeMare({ tau: Math.max(1, delay), dampingSteps: s.pipemareSteps, damping: false });
    case 'spectrain':
      return new SpecTrain({ delay, gamma: s.beta1 });
    case 'pipeoptim':
      if (!opt) throw new ParamStoreError('pipeoptim needs an optimizer');
      return new WeightPrediction({ delay, direction: (n, p, o) => opt.direction(n, p, o) });
    case 'lwp':
      return new LinearWeightPrediction({ delay });
    case 'fresco':
      return new FrescoPolicy({
        layers: frescoLayers(inputs ?? []),
        tau: Math.max(1, inflight - 1),
        alpha: s.alpha,
        holdUnprotected: s.backward === 'recompute',
      });
  }
}
