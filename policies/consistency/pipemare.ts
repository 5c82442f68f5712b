// PipeMare (Yang et al., MLSys 2021) for one stage:
//  * learning-rate damping: each update is scaled by τ^(−p_t), p_t = 1 − min(t/K, 1),
//    τ the stage's delay and t the update index. Adam-family updates are linear in
//    the lr (weight decay included), so scaling Δ is the same as damping η_t.
//  * discrepancy correction: an EMA of the applied updates,
//    δ ← γδ + (1−γ)Δ with γ = D^(1/τ), and the backward of mb runs on the
//    reconstructed forward-time weights w − s·δ. Our choice: s is the number of updates
//    actually applied since mb's forward (PipeMare uses the nominal delay τ; the store
//    knows the real count, which is 0 when nothing changed).
// Either part can be turned off. The reconstruction buffers are reused between calls.

import { ParamMap } from '../optim/params';
import { RunningState, copyArrays, countOf, loadArrays } from './running-state';
import { ConsistencyError, ConsistencyPolicy, FlightLog, LayerInput, UpdateContext, WeightsContext } from './policy';

export interface PipeMareOptions {
  /** τ: the stage's delay in updates (≥ 1). */
  readonly tau: number;
  /** K: updates over which the damping exponent goes from 1 to 0 (FRESCO used 15000). */
  readonly dampingSteps: number;
  /** D: discrepancy-correction coefficient, γ = D^(1/τ); default 0.02 (FRESCO's choice for Recovery). */
  readonly D?: number;
  readonly damping?: boolean;
  readonly correction?: boolean;
}

/** τ^(−p_t) with p_t = 1 − min(t/K, 1). */
export function dampingFactor(tau: number, t: number, K: number): number {
  const p = 1 - Math.min(t / K, 1);
  return tau ** -p;
}

export class PipeMare implements ConsistencyPolicy {
  readonly name = 'pipemare' as const;
  readonly gamma: number;
  private updates = 0;
  private readonly flight = new FlightLog();
  private readonly ema = new Map<string, Float32Array>();
  private readonly recon = new Map<string, Float32Array>();

  constructor(readonly opts: PipeMareOptions) {
    if (!(Number.isInteger(opts.tau) && opts.tau >= 1))
      throw new ConsistencyError(`pipemare: tau must be an integer ≥ 1, got ${opts.tau}`);
    if (!(opts.dampingSteps > 0))
      throw new ConsistencyError(`pipemare: dampingSteps must be > 0, got ${opts.dampingSteps}`);
    const D = opts.D ?? 0.02;
    if (!(D >= 0 && D < 1)) throw new ConsistencyError(`pipemare: D must be in [0, 1), got ${D}`);
    this.gamma = D ** (1 / opts.tau);
  }

  weightsForForward(mb: number, ctx: WeightsContext): ParamMap {
    this.flight.enter('pipemare', mb, this.updates);
    return ctx.params;
  }

  forward(_mb: number, _inputs: ReadonlyMap<string, LayerInput>): void {}

  weightsForBackward(mb: number, ctx: WeightsContext): ParamMap {
    const s = this.updates - this.flight.since('pipemare', mb, 'backward');
    if (s === 0 || this.opts.correction === false) return ctx.params;
    for (const [name, w] of ctx.params) {
      const d = this.ema.get(name);
      if (d === undefined) continue;
      let r = this.recon.get(name);
      if (r === undefined) this.recon.set(name, (r = new Float32Array(w.length)));
      for (let i = 0; i < w.length; i++) r[i] = w[i] - s * d[i];
    }
    const out = new Map<string, Float32Array>();
    for (const [name, w] of ctx.params) out.set(name, this.ema.has(name) ? (this.recon.get(name) as Float32Array) : w);
    return out;
  }

  backward(mb: number): void {
    this.flight.leave('pipemare', mb);
  }

  transformUpdate(updates: Map<string, Float32Array>, ctx: UpdateContext): void {
    const f = this.opts.damping === false ? 1 : dampingFactor(this.opts.tau, ctx.step, this.opts.dampingSteps);
    const g = this.gamma;
    for (const [name, u] of updates) {
      if (f !== 1) for (let i = 0; i < u.length; i++) u[i] *= f;
      if (this.opts.correction === false) continue;
      let d = this.ema.get(name);
      if (d === undefined) this.ema.set(name, (d = new Float32Array(u.length)));
      for (let i = 0; i < u.length; i++) d[i] = g * d[i] + (1 - g) * u[i];
    }
    this.updates += 1;
  }

  runningState(): RunningState {
    return { policy: this.name, counts: { updates: this.updates }, arrays: { ema: copyArrays(this.ema) } };
  }

  loadRunningState(s: RunningState): void {
    loadArrays(this.name, s, 'ema', this.ema);
    this.updates = countOf(s, 'updates');
  }

  extraStateBytes(): number {
    let b = 0;
    for (const a of this.ema.values()) b += a.byteLength;
    for (const a of this.recon.values()) b += a.byteLength;
    return b;
  }
}
