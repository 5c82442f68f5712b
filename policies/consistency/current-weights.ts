// What most consistency policies share: the backward runs on the current weights, the
// passes record nothing, updates go through unchanged and nothing is held beyond the
// parameters. A policy that differs only in its forward weights (the predictors, and no
// consistency at all) says just that and overrides the rest where it must.

import { ParamMap } from '../optim/params';
import { ConsistencyError, ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export abstract class CurrentWeightsPolicy implements ConsistencyPolicy {
  abstract readonly name: ConsistencyPolicy['name'];
  abstract weightsForForward(mb: number, ctx: WeightsContext): ParamMap;

  forward(_mb: number, _inputs: ReadonlyMap<string, LayerInput>): void {}

  weightsForBackward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }

  backward(_mb: number): void {}

  transformUpdate(_updates: Map<string, Float32Array>, _ctx: UpdateContext): void {}

  extraStateBytes(): number {
    return 0;
  }
}

export interface DelayOptions {
  /** s: updates between a forward and its microbatch's update at this stage (≥ 0). */
  readonly delay: number;
}

/** A weight predictor: its forward runs s updates ahead, with s its options' delay (an integer ≥ 0). */
export abstract class Predictor<O extends DelayOptions> extends CurrentWeightsPolicy {
  constructor(
    policy: string,
    readonly opts: O,
  ) {
    super();
    if (!(Number.isInteger(opts.delay) && opts.delay >= 0))
      throw new ConsistencyError(`${policy}: delay must be an integer ≥ 0, got ${opts.delay}`);
  }
}
