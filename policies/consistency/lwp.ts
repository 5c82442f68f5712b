// Linear weight prediction, LWP (Kosson et al., "Pipelined Backpropagation at Scale",
// MLSys 2021), for one stage: the forward of a microbatch runs on the weights the stage
// would reach if it kept moving at its current velocity for the s updates until that
// microbatch's update,
//   ŵ = w − s·η·v,   v = −Δ_last / η_last,
// the last step the stage took per unit learning rate (under momentum SGD that is the
// velocity buffer Kosson et al. extrapolate). The backward runs on the current weights,
// which the prediction aimed at; updates pass through unchanged.
//
// Against SpecTrain (spectrain.ts), which extrapolates a smoothed average of past steps,
// LWP uses the latest step alone; against PipeOptim (predict.ts), it uses the step the
// stage took rather than the one the optimizer's state says comes next.
//
// Extra state: v and the prediction buffer, two parameter-sized arrays.
// Not modelled: spike compensation, the other half of Kosson et al.'s method.

import { ParamMap } from '../optim/params';
import { RunningState, copyArrays, loadArrays } from './running-state';
import { Extrapolation } from './extrapolate';
import { DelayOptions, Predictor } from './current-weights';
import { UpdateContext, WeightsContext } from './policy';

export type LwpOptions = DelayOptions;

export class LinearWeightPrediction extends Predictor<LwpOptions> {
  readonly name = 'lwp' as const;
  private readonly v = new Map<string, Float32Array>();
  private readonly extrapolation = new Extrapolation();

  constructor(opts: LwpOptions) {
    super('lwp', opts);
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    if (this.opts.delay === 0 || this.v.size === 0) return ctx.params;
    return this.extrapolation.predict(ctx.params, this.v, this.opts.delay * ctx.lr);
  }

  override transformUpdate(updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    // A step at learning rate 0 is no step (Adam-family updates scale with the lr): nothing to learn from.
    if (!(ctx.lr > 0)) return;
    for (const [name, u] of updates) {
      let v = this.v.get(name);
      if (v === undefined) this.v.set(name, (v = new Float32Array(u.length)));
      for (let i = 0; i < u.length; i++) v[i] = -u[i] / ctx.lr;
    }
  }

  runningState(): RunningState {
    return { policy: this.name, counts: {}, arrays: { v: copyArrays(this.v) } };
  }

  loadRunningState(s: RunningState): void {
    loadArrays(this.name, s, 'v', this.v);
  }

  override extraStateBytes(): number {
    let b = this.extrapolation.bytes();
    for (const a of this.v.values()) b += a.byteLength;
    return b;
  }
}
