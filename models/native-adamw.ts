// The optimizer's side of the native kernels (native/optim.c): the AdamW step of each
// parameter tensor in one call, reading the parameter where tfjs holds it (a view of the
// wasm heap, or the cpu backend's array) and writing its new values into a fresh tensor
// of the backend, which the variable then takes (no copy of the parameters into JS and
// back); and the float64 gradient sums' accumulation. Both are bitwise the JS path's
// (policies/optim/adamw.ts, ordered-sum.ts), so they change speed, not results; the
// kernel set still names BatonAdamW (models/native-kernels.ts registers it with the fused kernels).

import * as tf from '@tensorflow/tfjs';
import { AdamWScalars } from '../policies/optim/adamw';
import { Accumulate } from '../policies/optim/ordered-sum';
import { Addon, memoryOf } from './native-kernel-funcs';

/** The addon's optimizer functions (absent from an addon built before them). */
export interface OptimAddon {
  adamw(
    p: Float32Array,
    g: Float64Array,
    m: Float32Array,
    v: Float32Array,
    out: Float32Array,
    n: number,
    w1: number,
    b2: number,
    w2: number,
    eps: number,
    step: number,
    bc2Sqrt: number,
    decay: number,
  ): void;
  addTo(sum: Float64Array, g: Float32Array, n: number): void;
}

/** The name the kernel set lists. */
export const NATIVE_ADAMW = 'BatonAdamW';

/** The addon per backend the native optimizer is on for. */
const on = new Map<string, OptimAddon>();

/** Turns the native optimizer on for `backendName`; returns the names to list ([] with an addon that lacks it). */
export function registerNativeAdamW(native: Addon, backendName: string): string[] {
  const o = native as Addon & Partial<OptimAddon>;
  if (typeof o.adamw !== 'function' || typeof o.addTo !== 'function') return [];
  on.set(backendName, o as OptimAddon);
  return [NATIVE_ADAMW];
}

export function removeNativeAdamW(backendName: string): void {
  on.delete(backendName);
}

/** The native optimizer of the active backend, or null (the JS path). */
export function nativeAdamW(): OptimAddon | null {
  return on.get(tf.getBackend()) ?? null;
}

/** The gradient sums' accumulation: native on a backend with the native optimizer, else undefined (OrderedSum's JS loop). */
export function nativeAccumulate(): Accumulate | undefined {
  const o = nativeAdamW();
  return o ? (sum, g) => o.addTo(sum, g, sum.length) : undefined;
}

/**
 * A step's kernel for AdamW.stepWith: writes `variable` + Δ into a new tensor of the
 * active backend (advancing m and v in place) and assigns it; the old values are freed
 * with the variable's last reference. Null when the variable's data is not in reach.
 */
export function adamwInto(
  o: OptimAddon,
  variable: tf.Variable,
  g: Float64Array,
): ((m: Float32Array, v: Float32Array, k: AdamWScalars) => void) | null {
  const mem = memoryOf(tf.getBackend(), tf.backend());
  if (variable.dtype !== 'float32' || !mem.view(variable)) return null;
  return (m, v, k) => {
    const out = mem.output([...variable.shape]);
    const p = mem.view(variable)!; // after the output: allocating can grow (and move) the wasm heap
    try {
      o.adamw(p, g, m, v, out.data(), variable.size, k.w1, k.b2, k.w2, k.eps, k.step, k.bc2Sqrt, k.decay);
    } catch (err) {
      (tf.backend() as unknown as { disposeData(id: tf.DataId): void }).disposeData(out.info.dataId);
      throw err;
    }
    const t = tf.engine().makeTensorFromTensorInfo(out.info);
    try {
      variable.assign(t);
    } finally {
      t.dispose();
    }
  };
}
