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
import { CapturedLinearInput } from '../models/layers';

export const CONSISTENCY_POLICIES = ['none', 'stash', 'pipemare', 'predict', 'fresco'] as const;
export type ConsistencyName = (typeof CONSISTENCY_POLICIES)[number];

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
  /** PipeMare with damping: updates over which the damping exponent decays to 0 (K). */
  pipemareSteps: number;
}

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
): ConsistencyPolicy {
  if (inflight <= 1) return new NoConsistency();
  switch (s.consistency) {
    case 'none':
      return new NoConsistency();
    case 'stash':
      return new WeightStash();
    case 'pipemare':
      return new PipeMare({
        tau: Math.max(1, delay),
        dampingSteps: s.pipemareSteps,
        damping: s.pipemareDamping === true,
      });
    case 'predict':
      if (!opt) throw new ParamStoreError('predict needs an optimizer');
      return new WeightPrediction({ delay, direction: (n, p, o) => opt.direction(n, p, o) });
    case 'fresco':
      return new FrescoPolicy({ layers: frescoLayers(inputs ?? []), tau: Math.max(1, inflight - 1), alpha: s.alpha });
  }
}
