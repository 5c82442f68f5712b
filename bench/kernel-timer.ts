// Times every kernel of one tfjs backend: each registered kernel is re-registered with
// a wrapper that counts its calls and its exclusive time (a kernel that calls another
// kernel's function through the registry, as the wasm fixes do with Transpose, is
// charged without the inner one's time). tfjs looks kernels up in the registry on
// every call, so the wrappers see every call the engine makes; the backends' kernels
// are synchronous on cpu and wasm, so wall time around the call is the kernel's time.
//
// Not measured: tfjs-node kernels (asynchronous), and time the engine spends around a
// kernel (tape, tidy scopes, disposal), which is the step's time minus the kernels'.

import * as tf from '@tensorflow/tfjs';
import { performance } from 'perf_hooks';

export interface KernelTally {
  readonly kernel: string;
  calls: number;
  /** Exclusive milliseconds. */
  ms: number;
}

export interface KernelTimer {
  /** The tallies since the last reset, slowest first. */
  tallies(): KernelTally[];
  reset(): void;
  /** Restores the kernels the timer wrapped. */
  remove(): void;
}

export class KernelTimerError extends Error {
  override name = 'KernelTimerError';
}

/** Wraps every kernel registered for `backendName` (call after the backend and its fixes are installed). */
export function installKernelTimer(backendName: string): KernelTimer {
  const kernels = tf.getKernelsForBackend(backendName);
  if (kernels.length === 0)
    throw new KernelTimerError(`kernel timer: no kernels are registered for backend ${JSON.stringify(backendName)}`);
  const tallies = new Map<string, KernelTally>();
  // Inclusive time of the kernels called inside the one running, per nesting level.
  const inner: number[] = [];
  for (const k of kernels) {
    const original = k.kernelFunc;
    const tally: KernelTally = { kernel: k.kernelName, calls: 0, ms: 0 };
    tallies.set(k.kernelName, tally);
    const timed: tf.KernelFunc = (args) => {
      inner.push(0);
      const t0 = performance.now();
      try {
        return original(args);
      } finally {
        const total = performance.now() - t0;
        const nested = inner.pop()!;
        tally.calls++;
        tally.ms += total - nested;
        if (inner.length > 0) inner[inner.length - 1] += total;
      }
    };
    tf.unregisterKernel(k.kernelName, backendName);
    tf.registerKernel({ ...k, kernelFunc: timed });
  }
  return {
    tallies: () =>
      [...tallies.values()]
        .filter((t) => t.calls > 0)
        .map((t) => ({ ...t }))
        .sort((a, b) => b.ms - a.ms),
    reset: () => {
      for (const t of tallies.values()) {
        t.calls = 0;
        t.ms = 0;
      }
    },
    remove: () => {
      for (const k of kernels) {
        tf.unregisterKernel(k.kernelName, backendName);
        tf.registerKernel(k);
      }
    },
  };
}
