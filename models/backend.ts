// Chooses the TensorFlow.js backend: tfjs-node-gpu, then tfjs-node, then wasm, then
// the pure-JS cpu backend, and reports which one runs and why the earlier ones did not.
// `force` (CLI `--backend`, env BATON_BACKEND) selects exactly one.
//
// Not modelled: multi-threaded wasm (Node needs a worker shim for it) and WebGL.

import * as path from 'path';
import * as tf from '@tensorflow/tfjs';
import { installWasmAllocationGuard, installWasmFixes } from './tfjs-fixes';
import { installSharedIdentity } from './wasm-shared-identity';
import { NativeKernelReport, describeKernels, installNativeKernels } from './native-kernels';
import { InputError } from '../base/errors';

export const BACKEND_CHOICES = ['tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu'] as const;
export type BackendChoice = (typeof BACKEND_CHOICES)[number];

export interface BackendAttempt {
  readonly name: BackendChoice;
  readonly ok: boolean;
  /** Why it failed, or what was done to make it work. */
  readonly reason: string;
}

export interface BackendReport {
  /** The choice in use, e.g. 'wasm'. */
  readonly backend: BackendChoice;
  /** tf's own name for it ('tensorflow' for the tfjs-node packages). */
  readonly tfName: string;
  readonly tried: readonly BackendAttempt[];
  /** Which kernels run natively (models/native-kernels.ts), and why not. */
  readonly kernels: NativeKernelReport;
}

export class BackendError extends InputError {
  override name = 'BackendError';
  constructor(
    message: string,
    readonly tried: readonly BackendAttempt[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** tf's registered name for each choice. */
const TF_NAMES: Record<BackendChoice, string> = {
  'tfjs-node-gpu': 'tensorflow',
  'tfjs-node': 'tensorflow',
  wasm: 'wasm',
  cpu: 'cpu',
};

let wasmPathsSet = false;

/**
 * Registers the wasm backend and points it at the .wasm files shipped in its package
 * (Node cannot fetch them). Loaded lazily: importing the package registers wasm above
 * cpu in tf's priority list, after which creating a tensor before tf.ready() throws.
 */
export function ensureWasmPaths(): void {
  if (wasmPathsSet) return;
  const wasm = require('@tensorflow/tfjs-backend-wasm') as typeof import('@tensorflow/tfjs-backend-wasm');
  const wasmFile = require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm');
  wasm.setWasmPaths(path.dirname(wasmFile) + path.sep);
  wasmPathsSet = true;
}

async function activate(tfName: string): Promise<void> {
  const ok = await tf.setBackend(tfName);
  if (!ok) throw new Error(`tf.setBackend(${JSON.stringify(tfName)}) returned false`);
  await tf.ready();
  if (tf.getBackend() !== tfName)
    throw new Error(`after setBackend the active backend is ${JSON.stringify(tf.getBackend())}`);
}

async function tryChoice(choice: BackendChoice): Promise<string> {
  switch (choice) {
    case 'tfjs-node-gpu':
    case 'tfjs-node': {
      // The package registers the 'tensorflow' backend when loaded.
      const pkg = `@tensorflow/${choice}`;
      try {
        require(pkg);
      } catch (err) {
        const code = (err as { code?: string }).code;
        throw new Error(
          code === 'MODULE_NOT_FOUND' ? `${pkg} is not installed` : `loading ${pkg} failed: ${(err as Error).message}`,
        );
      }
      await activate('tensorflow');
      return `loaded ${pkg}`;
    }
    case 'wasm': {
      ensureWasmPaths();
      installWasmFixes();
      installSharedIdentity();
      await activate('wasm');
      installWasmAllocationGuard();
      return 'wasm with Baton kernel fixes (explicit-transpose matMul, UnsortedSegmentSum, sharing Identity)';
    }
    case 'cpu':
      await activate('cpu');
      return 'pure-JS cpu backend';
  }
}

export function parseBackendChoice(value: string, source: string): BackendChoice {
  if ((BACKEND_CHOICES as readonly string[]).includes(value)) return value as BackendChoice;
  throw new BackendError(
    `${source}: unknown backend ${JSON.stringify(value)}; choices are ${BACKEND_CHOICES.join(', ')}`,
  );
}

let current: { key: string; report: BackendReport } | null = null;

/**
 * Loads a backend. Without `force` (and without env BATON_BACKEND) it takes the first of
 * BACKEND_CHOICES that works. Calling it again with the same request returns the same
 * report while that backend is still active.
 */
export async function loadBackend(opts: { force?: string } = {}): Promise<BackendReport> {
  const envForce = process.env['BATON_BACKEND'];
  const forced =
    opts.force !== undefined
      ? parseBackendChoice(opts.force, '--backend')
      : envForce !== undefined && envForce !== ''
        ? parseBackendChoice(envForce, 'BATON_BACKEND')
        : undefined;
  const key = forced ?? 'auto';
  if (current && current.key === key && tf.getBackend() === current.report.tfName) {
    // Idempotent; puts the native kernels back if something re-registered the backend's own.
    installNativeKernels(current.report.tfName);
    return current.report;
  }

  const candidates: readonly BackendChoice[] = forced ? [forced] : BACKEND_CHOICES;
  const tried: BackendAttempt[] = [];
  for (const name of candidates) {
    try {
      const reason = await tryChoice(name);
      const kernels = installNativeKernels(TF_NAMES[name]);
      tried.push({ name, ok: true, reason });
      const report: BackendReport = { backend: name, tfName: TF_NAMES[name], tried, kernels };
      current = { key, report };
      return report;
    } catch (err) {
      tried.push({ name, ok: false, reason: (err as Error).message });
    }
  }
  const summary = tried.map((t) => `${t.name}: ${t.reason}`).join('; ');
  throw new BackendError(`no TensorFlow.js backend could be loaded (${summary})`, tried);
}

/** One line for logs: `backend wasm (tfjs-node-gpu: not installed; tfjs-node: not installed); kernels: …`. */
export function describeBackend(report: BackendReport): string {
  const failed = report.tried.filter((t) => !t.ok).map((t) => `${t.name}: ${t.reason}`);
  return (
    `backend ${report.backend}` +
    (failed.length ? ` (${failed.join('; ')})` : '') +
    `; kernels: ${describeKernels(report.kernels)}`
  );
}
