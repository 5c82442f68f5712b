// Native matrix kernels for the wasm and cpu backends: BatchMatMul and _FusedMatMul run
// as one CBLAS sgemm per batch entry (OpenBLAS, native/baton_native.c), and Sum over
// leading axes (every bias gradient) as a column sum in C, on the memory
// tfjs already holds: on wasm, views of the wasm heap; on cpu, the backend's typed
// arrays. No copies; transposes are BLAS flags, not Transpose kernels. The addon is
// built at install (scripts/build-native.js) when the Node-API headers, a compiler
// and OpenBLAS are there; without it the tfjs kernels stay, and the report says why.
// With them, the fused LayerNorm, GELU and causal softmax kernels (models/fused-ops.ts)
// and the embedding's GatherV2 and UnsortedSegmentSum (its gradient) in C, and the AdamW
// step with the gradient sums' accumulation (models/native-adamw.ts, listed as BatonAdamW).
// Env BATON_KERNELS: 'tfjs' keeps tfjs's kernels; 'native' refuses to run without the
// addon; unset or 'auto' uses it when it loads; 'sgemm' uses only its matrix kernels
// and Sum (the kernel set before the fused ops, to compare). Env BATON_THREADS: the BLAS threads
// (models/threads.ts; default: all cores, a launcher gives its stage processes a share).
//
// Not handled natively (they fall through to the kernel registered before): dtypes
// other than float32, batch shapes that broadcast other than one side being a single
// matrix, fused activations other than linear and relu, biases that are not one value
// per output column, PReLU weights; Sum over other axes.

import * as path from 'path';
import * as tf from '@tensorflow/tfjs';
import { cores, threadsFromEnv } from './threads';
import { Addon, nativeMatMul, nativeSum } from './native-kernel-funcs';
import { nativeGather, nativeSegmentSum } from './fused-kernel-funcs';
import { registerFusedKernels, removeFusedKernels } from './fused-ops';
import { registerNativeAdamW, removeNativeAdamW } from './native-adamw';

export { sgemmPlan } from './native-kernel-funcs';

/** tfjs kernels replaced by native ones with the 'sgemm' set; the full set adds UnsortedSegmentSum and the fused kernels. */
export const NATIVE_KERNELS = ['BatchMatMul', '_FusedMatMul', 'Sum'] as const;
export type KernelsChoice = 'auto' | 'native' | 'sgemm' | 'tfjs';

export interface NativeKernelReport {
  /** The backend the kernels are registered for, or null before any install. */
  readonly backend: string | null;
  /** Kernel names that run natively on that backend (empty: tfjs's own kernels). */
  readonly kernels: readonly string[];
  /** The BLAS library's build, e.g. 'OpenBLAS 0.3.21 … Zen MAX_THREADS=64'. */
  readonly library: string | null;
  /** BLAS threads of this process (null without the addon). */
  readonly threads: number | null;
  /** Why the native kernels are not in use (null when they are). */
  readonly reason: string | null;
}

export class NativeKernelError extends Error {
  override name = 'NativeKernelError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Where the build leaves the addon, from dist/models or models (ts-node). */
export const ADDON_PATH = path.resolve(
  __dirname,
  __dirname.includes(`${path.sep}dist${path.sep}`) ? '../..' : '..',
  'native',
  'build',
  'Release',
  'baton_native.node',
);

let addon: Addon | null | undefined;
let loadProblem = '';

/** The addon, or null with the reason in loadProblem. Loaded once. */
function loadAddon(): Addon | null {
  if (addon !== undefined) return addon;
  try {
    addon = require(ADDON_PATH) as Addon;
  } catch (err) {
    const code = (err as { code?: string }).code;
    loadProblem =
      code === 'MODULE_NOT_FOUND'
        ? `the native addon is not built (${ADDON_PATH} is missing; run scripts/setup.sh, or node scripts/build-native.js to see why the build fails)`
        : `loading ${ADDON_PATH} failed: ${(err as Error).message}`;
    addon = null;
  }
  return addon;
}

export function parseKernelsChoice(value: string, source: string): KernelsChoice {
  if (value === 'auto' || value === 'native' || value === 'sgemm' || value === 'tfjs') return value;
  throw new NativeKernelError(
    `${source}: unknown kernel set ${JSON.stringify(value)}; choices are auto, native, sgemm, tfjs`,
  );
}

let report: NativeKernelReport = {
  backend: null,
  kernels: [],
  library: null,
  threads: null,
  reason: 'not installed yet (no backend loaded)',
};
/** Kernels this module replaced, per backend, to restore them. */
const replaced = new Map<string, Map<string, tf.KernelConfig>>();
/** The kernel functions this module registered, per backend, to tell when they were replaced. */
const ours = new Map<string, Map<string, tf.KernelFunc>>();
/** Whether the fused kernels are registered, per backend ('sgemm' leaves them out). */
const fusedOn = new Map<string, boolean>();

/** The BLAS threads this process was told to use (setNativeThreads), which a later install keeps. */
let chosenThreads: number | null = null;

/** Sets the BLAS threads of this process (no-op without the addon), for this and every later install. */
export function setNativeThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1)
    throw new NativeKernelError(`native kernels: threads must be a positive integer, got ${n}`);
  chosenThreads = n;
  applyThreads(n);
}

function applyThreads(n: number): void {
  const native = loadAddon();
  if (!native) return;
  native.setThreads(n);
  report = { ...report, threads: native.threads() };
}

/**
 * Registers the native kernels for `backendName` ('wasm' or 'cpu', after its own fixes),
 * falling back per call to the kernels registered before. Idempotent per backend.
 * Returns what runs natively and why not.
 */
export function installNativeKernels(
  backendName: string,
  opts: { choice?: KernelsChoice; threads?: number } = {},
): NativeKernelReport {
  const envChoice = process.env['BATON_KERNELS'];
  const choice = opts.choice ?? (envChoice ? parseKernelsChoice(envChoice, 'BATON_KERNELS') : 'auto');
  if (choice === 'tfjs') {
    removeNativeKernels(backendName);
    report = {
      backend: backendName,
      kernels: [],
      library: null,
      threads: null,
      reason: 'tfjs kernels asked for (BATON_KERNELS=tfjs)',
    };
    return report;
  }
  const refuse = (reason: string): NativeKernelReport => {
    if (choice === 'native')
      throw new NativeKernelError(`native kernels were asked for (BATON_KERNELS=native) but ${reason}`);
    report = { backend: backendName, kernels: [], library: null, threads: null, reason };
    return report;
  };
  if (backendName !== 'wasm' && backendName !== 'cpu')
    return refuse(`the ${backendName} backend keeps its own kernels (native kernels are for wasm and cpu)`);
  const native = loadAddon();
  if (!native) return refuse(loadProblem);
  // As many threads as this process is given (a backend loaded again for stages that run in
  // this process keeps what --threads set); a process that was told nothing has the machine.
  if (opts.threads !== undefined) setNativeThreads(opts.threads);
  else applyThreads(chosenThreads ?? threadsFromEnv() ?? cores());
  // Something else re-registered one of them (the wasm fixes' own remove and install do):
  // the record is stale, and the kernels now registered are the ones to fall back to.
  const mine = ours.get(backendName);
  if (mine && [...mine].some(([name, f]) => tf.getKernel(name, backendName)?.kernelFunc !== f)) {
    replaced.delete(backendName);
    ours.delete(backendName);
    fusedOn.delete(backendName);
  }
  const fused = choice !== 'sgemm';
  if (fusedOn.get(backendName) !== fused) removeNativeKernels(backendName);
  if (!replaced.has(backendName)) {
    const missing = registerOurs(native, backendName, fused);
    if (missing) return refuse(`the ${backendName} backend has no ${missing} kernel to fall back to`);
  }
  report = {
    backend: backendName,
    kernels: [
      ...replaced.get(backendName)!.keys(),
      ...(fused ? [...registerFusedKernels(native, backendName), ...registerNativeAdamW(native, backendName)] : []),
    ],
    library: native.config(),
    threads: native.threads(),
    reason: null,
  };
  return report;
}

/** Registers the native kernels over `backendName`'s own; returns the name of one it lacks (then registers none). */
function registerOurs(native: Addon, backendName: string, fused: boolean): string | null {
  const before = new Map<string, tf.KernelConfig>();
  const registered = new Map<string, tf.KernelFunc>();
  for (const name of fused ? [...NATIVE_KERNELS, 'UnsortedSegmentSum', 'GatherV2'] : NATIVE_KERNELS) {
    const k = tf.getKernel(name, backendName);
    if (!k) return name;
    before.set(name, k);
  }
  for (const [name, k] of before) {
    tf.unregisterKernel(name, backendName);
    const kernelFunc =
      name === 'Sum'
        ? nativeSum(native, backendName, k)
        : name === 'UnsortedSegmentSum'
          ? nativeSegmentSum(native, backendName, k)
          : name === 'GatherV2'
            ? nativeGather(native, backendName, k)
            : nativeMatMul(native, backendName, k, name === '_FusedMatMul');
    tf.registerKernel({ kernelName: name, backendName, kernelFunc });
    registered.set(name, kernelFunc);
  }
  replaced.set(backendName, before);
  ours.set(backendName, registered);
  fusedOn.set(backendName, fused);
  return null;
}

/** Restores the kernels installNativeKernels replaced on `backendName`. */
export function removeNativeKernels(backendName: string): void {
  const before = replaced.get(backendName);
  ours.delete(backendName);
  fusedOn.delete(backendName);
  removeFusedKernels(backendName);
  removeNativeAdamW(backendName);
  if (!before) return;
  for (const [name, k] of before) {
    tf.unregisterKernel(name, backendName);
    tf.registerKernel(k);
  }
  replaced.delete(backendName);
}

/** What the last install on the active backend did. */
export function nativeKernelReport(): NativeKernelReport {
  return report;
}

/**
 * The kernel set's name, recorded in checkpoints: 'tfjs', or 'native-sgemm:' with the
 * native kernels and the BLAS threads of the processes that compute (`threads`, default
 * this process's). Runs with different kernel sets round differently: OpenBLAS splits a
 * product among its threads in ways that change the rounding, so the thread count is
 * part of the set.
 */
export function kernelSetName(r: NativeKernelReport = report, threads: number | null = r.threads): string {
  return r.kernels.length === 0 ? 'tfjs' : `native-sgemm:${r.kernels.join(',')};threads=${threads}`;
}

/** One line: `native sgemm (OpenBLAS 0.3.21, 1 thread): BatchMatMul, _FusedMatMul, Sum` or `tfjs (native: why not)`. */
export function describeKernels(r: NativeKernelReport): string {
  if (r.kernels.length === 0) return `tfjs (native: ${r.reason})`;
  const lib = (r.library ?? 'BLAS').split(' ').slice(0, 2).join(' ');
  return `native sgemm (${lib}, ${r.threads} thread${r.threads === 1 ? '' : 's'}): ${r.kernels.join(', ')}`;
}
