// Inconsistent asynchronous training: every task uses the current weights and updates
// are applied as proposed. The baseline the other policies are measured against.

import { ParamMap } from '../optim/params';
import { ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export class NoConsistency implements ConsistencyPolicy {
  readonly name = 'none' as const;
  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }
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
