// SpecTrain (Chen, Yang & Cheng 2018) for one stage: a microbatch's passes run on the
// weights the stage is predicted to have when that microbatch's own update is applied,
//   ŵ = w − s·η·v̂,
// where v is SpecTrain's smoothed gradient: an exponential moving average, coefficient γ
// (the optimizer's β1 by default), of the steps the stage actually took, per unit
// learning rate (each applied Δ at learning rate η_t contributes −Δ/η_t), bias-corrected
// as v̂ = v / (1 − γ^t). Under momentum SGD that is exactly SpecTrain's momentum-smoothed
// gradient; under an adaptive optimizer it is the smoothed step, which is what the
// weights will keep doing. The horizon s is the updates between a pass and the
// microbatch's own update: the stage's delay for the forward; 0 for the backward, since a
// Baton stage applies a microbatch's update right after its backward, so the backward
// runs on the current weights. Updates pass through unchanged.
//
// What sets it apart from the other predictors: LWP (lwp.ts) extrapolates the last step
// alone, PipeOptim (predict.ts) the step the optimizer's state says comes next.
//
// Extra state: v and the prediction buffer, two parameter-sized arrays.
// Does not model: per-microbatch horizons (s is the stage's nominal delay).

import { ParamMap } from '../optim/params';
import { RunningState, copyArrays, countOf, loadArrays } from './running-state';
import { Extrapolation } from './extrapolate';
import { DelayOptions, Predictor } from './current-weights';
import { ConsistencyError, UpdateContext, WeightsContext } from './policy';

export interface SpecTrainOptions extends DelayOptions {
  /** γ: smoothing coefficient of the velocity, in [0, 1). */
  readonly gamma: number;
}

export class SpecTrain extends Predictor<SpecTrainOptions> {
  readonly name = 'spectrain' as const;
  private readonly v = new Map<string, Float32Array>();
  private readonly extrapolation = new Extrapolation();
  private updates = 0;

  constructor(opts: SpecTrainOptions) {
    super('spectrain', opts);
    if (!(opts.gamma >= 0 && opts.gamma < 1))
      throw new ConsistencyError(`spectrain: gamma must be in [0, 1), got ${opts.gamma}`);
  }

  /** The bias-corrected smoothed velocity v̂ of `name` (a copy), or undefined before the first update. */
  velocity(name: string): Float32Array | undefined {
    const v = this.v.get(name);
    if (v === undefined) return undefined;
    const c = 1 / (1 - this.opts.gamma ** this.updates);
    return v.map((x) => x * c);
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    if (this.opts.delay === 0 || this.updates === 0) return ctx.params;
    return this.extrapolation.predict(
      ctx.params,
      this.v,
      this.opts.delay * ctx.lr,
      1 / (1 - this.opts.gamma ** this.updates),
    );
  }

  override transformUpdate(updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    // A step at learning rate 0 is no step (Adam-family updates scale with the lr): nothing to learn from.
    if (!(ctx.lr > 0)) return;
    const g = this.opts.gamma;
    for (const [name, u] of updates) {
      let v = this.v.get(name);
      if (v === undefined) this.v.set(name, (v = new Float32Array(u.length)));
      for (let i = 0; i < u.length; i++) v[i] = g * v[i] + (1 - g) * (-u[i] / ctx.lr);
    }
    this.updates += 1;
  }

  runningState(): RunningState {
    return { policy: this.name, counts: { updates: this.updates }, arrays: { v: copyArrays(this.v) } };
  }

  loadRunningState(s: RunningState): void {
    loadArrays(this.name, s, 'v', this.v);
    this.updates = countOf(s, 'updates');
  }

  override extraStateBytes(): number {
    let b = this.extrapolation.bytes();
    for (const a of this.v.values()) b += a.byteLength;
    return b;
  }
}
