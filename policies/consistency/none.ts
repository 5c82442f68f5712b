// Inconsistent asynchronous training: every task uses the current weights and updates
// are applied as proposed. The baseline the other policies are measured against.

import { ParamMap } from '../optim/params';
import { CurrentWeightsPolicy } from './current-weights';
import { WeightsContext } from './policy';

export class NoConsistency extends CurrentWeightsPolicy {
  readonly name = 'none' as const;
  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    return ctx.params;
  }
}
