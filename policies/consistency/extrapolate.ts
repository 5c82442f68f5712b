// Linear extrapolation of a stage's weights along a velocity, shared by the prediction
// baselines that learn their velocity from the updates the stage applied (SpecTrain,
// LWP): ŵ = w − s·η·v, with s the horizon in updates, η the next update's learning rate
// and v a velocity in units of "update per unit learning rate" (an applied Δ taken with
// learning rate η_t contributes −Δ/η_t, so a schedule that changes η does not change v).
// The prediction buffers are reused between calls.

import { ParamMap } from '../optim/params';

export class Extrapolation {
  private readonly predicted = new Map<string, Float32Array>();

  /** ŵ = w − scale·v for every parameter that has a velocity; the others as they are. */
  predict(params: ParamMap, velocity: ReadonlyMap<string, Float32Array>, scale: number, vScale = 1): ParamMap {
    const out = new Map<string, Float32Array>();
    for (const [name, w] of params) {
      const v = velocity.get(name);
      if (v === undefined) {
        out.set(name, w);
        continue;
      }
      let p = this.predicted.get(name);
      if (p === undefined) this.predicted.set(name, (p = new Float32Array(w.length)));
      const c = scale * vScale;
      for (let i = 0; i < w.length; i++) p[i] = w[i] - c * v[i];
      out.set(name, p);
    }
    return out;
  }

  bytes(): number {
    let b = 0;
    for (const a of this.predicted.values()) b += a.byteLength;
    return b;
  }
}
