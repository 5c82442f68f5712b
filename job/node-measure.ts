// Measuring a node agent's capabilities (actors/node-capabilities.ts) for its NATS service
// (job/node-service.ts): its backend and calibrated speeds, measured on a worker thread,
// and what the process may use (cores, memory, heap).

import * as os from 'os';
import * as v8 from 'v8';
import * as fs from 'fs';
import * as path from 'path';
import { Worker } from 'worker_threads';
import { NodeCapabilities } from '../actors/node-capabilities';
import { CALIBRATE_DEFAULTS } from './defaults';

export interface MeasureOptions {
  readonly node: string;
  readonly tags: Readonly<Record<string, string>>;
  /** Force a tfjs backend (else the first that loads). */
  readonly backend?: string;
  /** Time each calibration measurement repeats for, ms. */
  readonly budgetMs: number;
}

/** Baton's version, from its package.json. */
export function batonVersion(): string {
  const { packageRoot } = require('../models/profile') as typeof import('../models/profile');
  const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** What the measuring thread finds: the backend it loaded and the two speeds. */
export interface Measured {
  readonly backend: string;
  readonly backends_tried: string[];
  readonly gflops_matmul: number;
  readonly gflops_stage: number;
}

/** Loads a backend and calibrates it on this thread (models/calibrate.ts): job/node-measure-worker.ts runs it. */
export async function measureHere(o: Pick<MeasureOptions, 'backend' | 'budgetMs'>): Promise<Measured> {
  const { loadBackend } = require('../models/backend') as typeof import('../models/backend');
  const { calibrate } = require('../models/calibrate') as typeof import('../models/calibrate');
  const report = await loadBackend({ force: o.backend });
  const c = calibrate({ ...CALIBRATE_DEFAULTS, budgetMs: o.budgetMs });
  return {
    backend: report.backend,
    backends_tried: report.tried.map((t) => `${t.name}:${t.ok ? 'ok' : 'failed'}`),
    gflops_matmul: round(c.matmul.gflops),
    gflops_stage: round(c.stage.gflops),
  };
}

/** `measureHere` on a worker thread, so loading tfjs and calibrating never hold the agent's own thread. */
function measureInWorker(o: MeasureOptions): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(path.join(__dirname, 'node-measure-worker.js'), {
      workerData: { backend: o.backend, budgetMs: o.budgetMs },
    });
    let done = false;
    worker.once('message', (m: { measured?: Measured; error?: string }) => {
      done = true;
      if (m.measured) resolve(m.measured);
      else reject(new Error(m.error ?? 'the measuring thread sent nothing'));
      void worker.terminate();
    });
    worker.once('error', (e) => {
      done = true;
      reject(e);
    });
    worker.once('exit', (code) => {
      if (!done) reject(new Error(`the measuring thread exited (${code}) before it measured`));
    });
  });
}

/**
 * This process's capabilities: a worker thread loads the backend and calibrates it (the same
 * cores as the stages' compute; tfjs only when an agent measures, never in `baton run`'s own
 * stage processes); the heap figure is the agent's own thread's.
 */
export async function measureCapabilities(o: MeasureOptions): Promise<NodeCapabilities> {
  const m = await measureInWorker(o);
  const heap = v8.getHeapStatistics();
  return {
    node: o.node,
    host: os.hostname(),
    pid: process.pid,
    ...m,
    measured_at: new Date().toISOString(),
    cores: os.availableParallelism(),
    memory_bytes: os.totalmem(),
    free_heap_bytes: Math.max(0, heap.heap_size_limit - heap.used_heap_size),
    version: batonVersion(),
    tags: o.tags,
  };
}

const round = (x: number) => Math.round(x * 1000) / 1000;
