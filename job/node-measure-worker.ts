// The worker thread a node agent measures its capabilities on (job/node-measure.ts): it
// loads tfjs and a backend, calibrates, posts the result (or the error's message) and ends.

import { parentPort, workerData } from 'worker_threads';
import { measureHere } from './node-measure';

const o = workerData as { backend?: string; budgetMs: number };
measureHere(o).then(
  (measured) => parentPort?.postMessage({ measured }),
  (err: unknown) => parentPort?.postMessage({ error: err instanceof Error ? err.message : String(err) }),
);
