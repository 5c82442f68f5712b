// Weight prediction (SpecTrain / PipeOptim style): the forward of a microbatch runs on
// the weights the stage is expected to have when its backward arrives,
//   ŵ = w − s·η·dir,
// with s the stage's delay in updates, η the current lr and dir the optimizer's
// current direction (Optimizer.direction: next Δ ≈ −η·dir). The backward uses the
// current weights, which the prediction aimed at. Updates pass through unchanged.
// Does not model: per-microbatch delays (s is the stage's nominal delay).

import { ParamMap } from '../optim/params';
import { DelayOptions, Predictor } from './current-weights';
import { WeightsContext } from './policy';

export type DirectionSource = (name: string, param: Float32Array, out: Float32Array) => void;

export interface PredictOptions extends DelayOptions {
  /** Usually `(n, p, o) => optimizer.direction(n, p, o)`. */
  readonly direction: DirectionSource;
}

export class WeightPrediction extends Predictor<PredictOptions> {
  readonly name = 'predict' as const;
  private readonly dir = new Map<string, Float32Array>();
  private readonly predicted = new Map<string, Float32Array>();

  constructor(opts: PredictOptions) {
    super('predict', opts);
  }

  weightsForForward(_mb: number, ctx: WeightsContext): ParamMap {
    const scale = this.opts.delay * ctx.lr;
    if (scale === 0 || ctx.step === 0) return ctx.params;
    for (const [name, w] of ctx.params) {
      let d = this.dir.get(name);
      if (d === undefined) this.dir.set(name, (d = new Float32Array(w.length)));
      let p = this.predicted.get(name);
      if (p === undefined) this.predicted.set(name, (p = new Float32Array(w.length)));
      this.opts.direction(name, w, d);
      for (let i = 0; i < w.length; i++) p[i] = w[i] - scale * d[i];
    }
    return this.predicted;
  }

  override extraStateBytes(): number {
    let b = 0;
    for (const a of this.dir.values()) b += a.byteLength;
    for (const a of this.predicted.values()) b += a.byteLength;
    return b;
  }
}
