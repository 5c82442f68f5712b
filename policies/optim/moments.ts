// Storage shared by the Adam-family optimizers: first and second moments per named
// parameter, the reusable Δ buffers, argument checks and (de)serialization. The
// update rules themselves live in adamw.ts and nadamw.ts.

import { Optimizer, OptimizerState } from './optimizer';
import { ParamError, ParamInfo, ParamMap, lookup, sizeOf } from './params';

export interface AdamFamilyOptions {
  /** β1 (AdamW default 0.9; NAdamW default 0.99 as in the FRESCO runs). */
  readonly beta1?: number;
  /** β2, default 0.999. */
  readonly beta2?: number;
  /** ε added to the denominator, default 1e-8. */
  readonly eps?: number;
  /** Decoupled weight decay λ (Δ gets −lr·λ·param), default 0.01. */
  readonly weightDecay?: number;
}

export class OptimizerConfigError extends Error {
  override name = 'OptimizerConfigError';
}

export interface Slot {
  readonly info: ParamInfo;
  readonly size: number;
  readonly decay: boolean;
  m: Float32Array;
  v: Float32Array;
  readonly delta: Float32Array;
}

export function checkRange(where: string, what: string, x: number, lo: number, hi: number, hiOpen: boolean): number {
  const ok = Number.isFinite(x) && x >= lo && (hiOpen ? x < hi : x <= hi);
  if (!ok) throw new OptimizerConfigError(`${where}: ${what} must be in [${lo}, ${hi}${hiOpen ? ')' : ']'}, got ${x}`);
  return x;
}

export abstract class MomentOptimizer implements Optimizer {
  abstract readonly kind: 'adamw' | 'nadamw';
  readonly params: readonly ParamInfo[];
  protected readonly slots = new Map<string, Slot>();
  protected t = 0;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;

  constructor(params: readonly ParamInfo[], opts: AdamFamilyOptions, defaultBeta1: number) {
    const where = this.constructor.name;
    this.beta1 = checkRange(where, 'beta1', opts.beta1 ?? defaultBeta1, 0, 1, true);
    this.beta2 = checkRange(where, 'beta2', opts.beta2 ?? 0.999, 0, 1, true);
    this.eps = checkRange(where, 'eps', opts.eps ?? 1e-8, 0, Infinity, false);
    this.weightDecay = checkRange(where, 'weightDecay', opts.weightDecay ?? 0.01, 0, Infinity, false);
    this.params = params;
    for (const info of params) {
      if (this.slots.has(info.name)) throw new ParamError(`${where}: parameter "${info.name}" listed twice`);
      const size = sizeOf(info.shape);
      this.slots.set(info.name, {
        info,
        size,
        decay: info.decay ?? true,
        m: new Float32Array(size),
        v: new Float32Array(size),
        delta: new Float32Array(size),
      });
    }
  }

  get step(): number {
    return this.t;
  }

  propose(params: ParamMap, grads: ParamMap, lr: number): Map<string, Float32Array> {
    const where = `${this.kind} step ${this.t + 1}`;
    checkRange(where, 'lr', lr, 0, Infinity, false);
    // Check everything before touching any state, so a bad call leaves the optimizer as it was.
    const ps: Float32Array[] = [];
    const gs: Float32Array[] = [];
    for (const s of this.slots.values()) {
      ps.push(lookup(params, s.info.name, s.size, `${where}, params`));
      gs.push(lookup(grads, s.info.name, s.size, `${where}, grads`));
    }
    this.t += 1;
    this.beginStep(this.t);
    const out = new Map<string, Float32Array>();
    let i = 0;
    for (const s of this.slots.values()) {
      this.updateSlot(s, ps[i], gs[i], lr);
      out.set(s.info.name, s.delta);
      i++;
    }
    return out;
  }

  /** Per-step scalars (bias corrections, μ's) for step t (1-based). */
  protected abstract beginStep(t: number): void;
  /** Advances s.m and s.v with g and writes Δ into s.delta. */
  protected abstract updateSlot(s: Slot, p: Float32Array, g: Float32Array, lr: number): void;
  abstract direction(name: string, param: Float32Array, out: Float32Array): void;

  /**
   * Advances s.m and s.v with g, m ← m + (1−β1)(g − m) and v ← β2·v + (1−β2)·g², and writes
   * s.delta[i] = deltaOf(i, g_i, m_i, v_i, lr·λ). m_i and v_i are the float64 values before the
   * float32 store, so each element is rounded once.
   */
  protected advanceMoments(
    s: Slot,
    g: Float32Array,
    lr: number,
    deltaOf: (i: number, gi: number, mi: number, vi: number, decay: number) => number,
  ): void {
    const { m, v, delta } = s;
    const w1 = 1 - this.beta1;
    const b2 = this.beta2;
    const w2 = 1 - b2;
    const decay = s.decay ? lr * this.weightDecay : 0;
    for (let i = 0; i < delta.length; i++) {
      const gi = g[i];
      const mi = (m[i] = m[i] + w1 * (gi - m[i]));
      const vi = (v[i] = b2 * v[i] + w2 * gi * gi);
      delta[i] = deltaOf(i, gi, mi, vi, decay);
    }
  }

  protected slot(name: string, where: string): Slot {
    const s = this.slots.get(name);
    if (s === undefined)
      throw new ParamError(
        `${this.kind} ${where}: unknown parameter "${name}"; have [${[...this.slots.keys()].join(', ')}]`,
      );
    return s;
  }

  protected extraState(): { muProduct?: number } {
    return {};
  }

  protected loadExtra(_state: OptimizerState): void {}

  state(): OptimizerState {
    const m: Record<string, Float32Array> = {};
    const v: Record<string, Float32Array> = {};
    for (const [name, s] of this.slots) {
      m[name] = s.m.slice();
      v[name] = s.v.slice();
    }
    return { kind: this.kind, step: this.t, ...this.extraState(), m, v };
  }

  load(state: OptimizerState): void {
    const where = `${this.kind} load`;
    if (state.kind !== this.kind) throw new ParamError(`${where}: state is for "${state.kind}"`);
    if (!Number.isInteger(state.step) || state.step < 0) throw new ParamError(`${where}: bad step ${state.step}`);
    for (const [name, s] of this.slots) {
      const m = state.m[name];
      const v = state.v[name];
      if (m === undefined || v === undefined) throw new ParamError(`${where}: no moments for parameter "${name}"`);
      if (m.length !== s.size || v.length !== s.size) {
        throw new ParamError(
          `${where}: parameter "${name}" moments have ${m.length}/${v.length} elements, expected ${s.size}`,
        );
      }
    }
    this.loadExtra(state);
    for (const [name, s] of this.slots) {
      s.m = Float32Array.from(state.m[name]);
      s.v = Float32Array.from(state.v[name]);
    }
    this.t = state.step;
  }

  stateBytes(): number {
    let b = 0;
    for (const s of this.slots.values()) b += s.m.byteLength + s.v.byteLength;
    return b;
  }
}
