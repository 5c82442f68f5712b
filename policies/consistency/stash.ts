// Weight stashing (PipeDream): the backward of mb uses exactly the weights its forward
// used. Bookkeeping is copy-on-update: a forward only records the current weight
// version; the weights are copied in transformUpdate, just before they change, and only
// if some in-flight mb still needs that version. Versions shared by several mbs are
// stored once and freed when the last of them runs backward.
//
// Does not model: vertical sync across stages (each stage stashes on its own).

import { ParamMap } from '../optim/params';
import { CopyOnUpdate } from './copy-on-update';
import { ConsistencyPolicy, LayerInput, UpdateContext, WeightsContext } from './policy';

export class WeightStash implements ConsistencyPolicy {
  readonly name = 'stash' as const;
  private readonly versions = new CopyOnUpdate('stash');

  weightsForForward(mb: number, ctx: WeightsContext): ParamMap {
    this.versions.enter(mb);
    return ctx.params;
  }

  forward(_mb: number, _inputs: ReadonlyMap<string, LayerInput>): void {}

  weightsForBackward(mb: number, ctx: WeightsContext): ParamMap {
    return this.versions.seenBy(mb) ?? ctx.params;
  }

  backward(mb: number): void {
    this.versions.leave(mb);
  }

  transformUpdate(_updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    this.versions.beforeUpdate(ctx.params);
  }

  /** Distinct weight versions held. */
  get versionsHeld(): number {
    return this.versions.versionsHeld;
  }

  extraStateBytes(): number {
    return this.versions.bytes();
  }
}
